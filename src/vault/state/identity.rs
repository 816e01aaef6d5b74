//! Which state folder is a vault's: an identity that follows the vault, not its inode.
//!
//! A vault's state (note history, the passphrase, OAuth grants, the audit log, the writers'
//! lock) lives in `state-1/<id>/` under the state root. Each such folder holds `vault.json`, a
//! [`Record`] of the folder it belongs to: the absolute path it was last opened at, the root's
//! device and inode numbers and birth time, and a sample of its notes' paths. When a vault
//! opens, [`choose`] picks its folder:
//!
//! 1. the record of the same folder (device, inode and, where the file system keeps one, birth
//!    time): a restart, or the folder renamed or moved on its file system (the record's path is
//!    updated);
//! 2. a folder named after the device and inode (`<dev>-<ino>`, the layout before records): the
//!    same vault, upgraded in place;
//! 3. the record of the same path, when at least half of the notes it sampled are here: the
//!    folder was restored from a backup or re-synced (a new inode at the same place). Fewer, and
//!    the folder at that path is another vault: it starts a state of its own, and a notice names
//!    the old one and `capvault state --adopt`;
//! 4. otherwise a new state. When the notes of a vault whose folder is gone are nearly all here
//!    (a vault copied to another disk, say), a notice says so; that state is never taken without
//!    `capvault state --adopt`, since a copy and a move look alike.
//!
//! An unrelated folder therefore never inherits a state: it must share the path and most of the
//! notes, or be adopted by hand.

use std::collections::HashSet;
use std::io;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::StateError;
use crate::vault::private::{FolderError, Lock, PrivateDir};
use crate::vault::{Ambient, Vault, VaultPath, ambient};

/// The record's file name in each state folder.
pub const RECORD: &str = "vault.json";
/// The lock held while a state is chosen or adopted, in the state root's `state-1` folder.
pub(super) const REGISTRY_LOCK: &str = "registry.lock";
/// Most state folders looked at.
const MAX_STATES: usize = 10_000;
/// Largest record read.
const MAX_RECORD: u64 = 256 * 1024;
/// Notes sampled into a record (the first ones a walk meets).
pub const SAMPLE: usize = 256;
/// Records of vaults whose folder is gone that are compared with this vault's notes (for the
/// notice), most recently seen first.
const MAX_COMPARED: usize = 64;

/// What a state folder records about the vault it belongs to.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The state folder's name.
    pub id: String,
    /// The absolute path the vault was last opened at.
    pub path: String,
    /// The root folder's device number.
    pub dev: u64,
    /// The root folder's inode number.
    pub ino: u64,
    /// The root folder's birth time (`secs.nanos`), where the file system keeps one.
    #[serde(default)]
    pub birth: Option<String>,
    /// Vault paths of up to [`SAMPLE`] of its notes, when last opened.
    #[serde(default)]
    pub notes: Vec<String>,
    /// When it was last opened (seconds since the Unix epoch).
    #[serde(default)]
    pub seen: u64,
    /// Set when `capvault state --adopt` gave its vault another state: it matches no folder.
    #[serde(default)]
    pub detached: bool,
}

/// The vault being opened, as [`choose`] compares it with the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// Its absolute path.
    pub path: String,
    /// The root's device number.
    pub dev: u64,
    /// The root's inode number.
    pub ino: u64,
    /// The root's birth time, where kept.
    pub birth: Option<String>,
}

impl Current {
    /// The identity of `vault`'s root folder.
    pub fn of(vault: &Vault) -> io::Result<Current> {
        let (dev, ino) = vault.identity()?;
        Ok(Current {
            path: vault.host_path().to_string_lossy().into_owned(),
            dev,
            ino,
            birth: vault.birth_time(),
        })
    }

    /// The folder name of the layout before records.
    pub fn legacy_name(&self) -> String {
        format!("{:x}-{:x}", self.dev, self.ino)
    }

    /// True when `r` records this very folder (and was not detached).
    pub fn is_folder_of(&self, r: &Record) -> bool {
        !r.detached
            && r.dev == self.dev
            && r.ino == self.ino
            && match (&r.birth, &self.birth) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// How a vault's state folder was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// The same folder at the same path.
    Same,
    /// The same folder, renamed or moved on its file system.
    Moved {
        /// The path it had.
        from: String,
    },
    /// Another folder at the recorded path holding most of the notes it sampled.
    Restored {
        /// Sampled notes found here.
        present: usize,
        /// Notes sampled.
        sampled: usize,
    },
    /// A folder named after the device and inode numbers (made before records existed).
    Legacy,
    /// Given to it by `capvault state --adopt`.
    Adopted,
    /// None matched: a new state.
    New,
}

impl How {
    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            How::Same => "the same folder as last time".to_owned(),
            How::Moved { from } => format!("the same folder, moved from {from}"),
            How::Restored { present, sampled } => format!(
                "a folder restored or re-synced at the same path ({present} of the {sampled} \
                 notes it sampled are here)"
            ),
            How::Legacy => "the same folder (a state made before vault records)".to_owned(),
            How::Adopted => "adopted with capvault state --adopt".to_owned(),
            How::New => "a new state (no earlier state matched)".to_owned(),
        }
    }
}

/// The state folder chosen for a vault, how, and what the user should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The state folder's name (`None`: a new one is to be made).
    pub id: Option<String>,
    /// How it matched.
    pub how: How,
    /// Things the user should hear about (logged at startup, shown by `capvault state`).
    pub notices: Vec<String>,
}

/// Everything [`choose`] learns from the disk, asked lazily.
pub trait Probe {
    /// Of the notes `record` sampled, how many exist in the vault being opened.
    fn present(&self, record: &Record) -> usize;
    /// True when the folder `record` describes still exists at its path (same device, inode).
    fn alive(&self, record: &Record) -> bool;
}

/// Picks the state of `current` among `records` and the state folders `legacy` (names of
/// folders without a record). Pure: every look at the disk goes through `probe`.
pub fn choose(
    records: &[Record],
    legacy: &[String],
    current: &Current,
    probe: &dyn Probe,
) -> Choice {
    let mut notices = Vec::new();
    let latest = |it: &mut dyn Iterator<Item = &Record>| it.max_by_key(|r| r.seen).cloned();
    if let Some(r) = latest(&mut records.iter().filter(|r| current.is_folder_of(r))) {
        let how = if r.path == current.path {
            How::Same
        } else {
            How::Moved { from: r.path }
        };
        return Choice {
            id: Some(r.id),
            how,
            notices,
        };
    }
    let legacy_name = current.legacy_name();
    if legacy.contains(&legacy_name) {
        return Choice {
            id: Some(legacy_name),
            how: How::Legacy,
            notices,
        };
    }
    if let Some(r) = latest(
        &mut records
            .iter()
            .filter(|r| !r.detached && r.path == current.path),
    ) {
        let sampled = r.notes.len();
        let present = probe.present(&r);
        if sampled > 0 && present * 2 >= sampled {
            notices.push(format!(
                "the vault's folder was replaced (restored from a backup or re-synced): {present} \
                 of the {sampled} notes it sampled are here, so it keeps its state {}",
                r.id
            ));
            return Choice {
                id: Some(r.id),
                how: How::Restored { present, sampled },
                notices,
            };
        }
        notices.push(format!(
            "another folder was at this path before, with its own state {}; only {present} of \
             the {sampled} notes it sampled are here, so this vault starts a new state \
             (`capvault state VAULT --adopt {}` to use that one instead)",
            r.id, r.id
        ));
    }
    let mut gone: Vec<&Record> = records
        .iter()
        .filter(|r| !r.detached && r.path != current.path && !r.notes.is_empty())
        .collect();
    gone.sort_by_key(|r| std::cmp::Reverse(r.seen));
    for r in gone.into_iter().take(MAX_COMPARED) {
        let sampled = r.notes.len();
        // Nine in ten of its notes here, and its own folder gone.
        if probe.present(r) * 10 >= sampled * 9 && !probe.alive(r) {
            notices.push(format!(
                "this vault holds the notes of the vault last seen at {} (state {}), whose folder \
                 is gone; if it was moved here, `capvault state VAULT --adopt {}` keeps its \
                 history and grants",
                r.path, r.id, r.id
            ));
        }
    }
    Choice {
        id: None,
        how: How::New,
        notices,
    }
}

/// A new state folder name: `v` and 32 random hex digits.
pub fn new_id() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(format!("v{}", base16ct::lower::encode_string(&bytes)))
}

/// True for a state folder name: a new id or the `<dev>-<ino>` of the layout before it.
pub fn valid_id(name: &str) -> bool {
    let hex = |s: &str| !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_hexdigit());
    match name.strip_prefix('v') {
        Some(rest) if rest.len() == 32 && hex(rest) => true,
        _ => name
            .split_once('-')
            .is_some_and(|(dev, ino)| hex(dev) && hex(ino)),
    }
}

/// The state folders under `state-1`: their records, and the names of those without one. A
/// state folder that is not private fails the whole read (its record could have been planted),
/// as opening it would.
pub(super) fn read_all(base: &PrivateDir) -> Result<(Vec<Record>, Vec<String>), StateError> {
    let mut records = Vec::new();
    let mut legacy = Vec::new();
    for name in base.folder_names(MAX_STATES)? {
        if !valid_id(&name) {
            continue;
        }
        let dir = match base.open_sub_dir(&name) {
            Ok(dir) => dir,
            Err(FolderError::NotPrivate) => return Err(StateError::NotPrivate),
            Err(_) => continue,
        };
        match dir.read(RECORD, MAX_RECORD) {
            Ok(Some(bytes)) => match serde_json::from_slice::<Record>(&bytes) {
                Ok(mut r) => {
                    // The folder's name is the id, whatever the file says.
                    r.id = name;
                    records.push(r);
                }
                Err(e) => tracing::warn!(state = %name, error = %e, "unreadable vault.json"),
            },
            Ok(None) => legacy.push(name),
            Err(e) => tracing::warn!(state = %name, error = ?e.kind(), "unreadable vault.json"),
        }
    }
    Ok((records, legacy))
}

/// Writes `record` into its state folder `dir` (replacing the file whole, durably).
pub(super) fn write_record(dir: &PrivateDir, record: &Record) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
    dir.replace(RECORD, &bytes)
}

/// The paths of up to [`SAMPLE`] notes of `vault`, the first ones a walk meets.
pub fn sample(vault: &Vault) -> Vec<String> {
    let mut out = Vec::new();
    let _ = vault.walk(
        &VaultPath::root(),
        true,
        &|name| name.ends_with(".md"),
        &mut |entry| {
            out.push(entry.path.as_str().to_owned());
            if out.len() >= SAMPLE {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    );
    out
}

/// This vault's record, as it is now.
pub fn record_of(vault: &Vault, id: &str) -> io::Result<Record> {
    let current = Current::of(vault)?;
    Ok(Record {
        id: id.to_owned(),
        path: current.path,
        dev: current.dev,
        ino: current.ino,
        birth: current.birth,
        notes: sample(vault),
        seen: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        detached: false,
    })
}

/// The disk, as [`choose`] sees it: notes looked up in the vault, recorded folders opened by
/// their path (to see whether they still exist; nothing is read from them).
pub struct DiskProbe<'a> {
    /// The vault being opened.
    pub vault: &'a Vault,
}

impl Probe for DiskProbe<'_> {
    fn present(&self, record: &Record) -> usize {
        let mut seen = HashSet::new();
        record
            .notes
            .iter()
            .filter(|p| seen.insert(p.as_str()))
            .filter_map(|p| VaultPath::parse(p).ok())
            .filter(|p| self.vault.stat_file(p).is_ok())
            .count()
    }

    fn alive(&self, record: &Record) -> bool {
        ambient(Ambient::Open(Path::new(&record.path)))
            .and_then(|d| d.dir_metadata())
            .is_ok_and(|m| crate::vault::sys::file_id(&m) == (record.dev, record.ino))
    }
}

/// Takes the registry lock of `base` (the `state-1` folder).
pub(super) fn lock(base: &PrivateDir) -> io::Result<Lock> {
    base.lock(REGISTRY_LOCK, Duration::from_secs(10))
}

/// One state folder, as `capvault state` lists it.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The folder's name.
    pub id: String,
    /// Its record (`None`: a folder of the layout before records).
    pub record: Option<Record>,
    /// Kept note versions: how many, and their bytes.
    pub versions: (usize, u64),
    /// True when it holds the built-in authorization server's files (passphrase, grants).
    pub oauth: bool,
    /// True when the folder its record names still exists there.
    pub alive: bool,
}

/// What `capvault state` shows: the state a vault would use, and every state under the root.
#[derive(Debug, Clone)]
pub struct Report {
    /// What opening the vault with `--write` would pick now.
    pub choice: Choice,
    /// Every state folder, most recently seen first.
    pub states: Vec<Summary>,
}

/// The report for `vault` over the `state-1` folder `base`.
pub(super) fn report(base: &PrivateDir, vault: &Vault) -> Result<Report, StateError> {
    let (records, legacy) = read_all(base)?;
    let current = Current::of(vault)?;
    let probe = DiskProbe { vault };
    let choice = choose(&records, &legacy, &current, &probe);
    let summary = |id: &str, record: Option<Record>| -> Summary {
        let (versions, oauth) = match base.open_sub_dir(id) {
            Ok(dir) => (count_versions(&dir), dir.open_sub_dir("oauth").is_ok()),
            Err(_) => ((0, 0), false),
        };
        let alive = record.as_ref().is_some_and(|r| probe.alive(r));
        Summary {
            id: id.to_owned(),
            record,
            versions,
            oauth,
            alive,
        }
    };
    let mut states: Vec<Summary> = records
        .iter()
        .map(|r| summary(&r.id, Some(r.clone())))
        .chain(legacy.iter().map(|id| summary(id, None)))
        .collect();
    states.sort_by_key(|s| std::cmp::Reverse(s.record.as_ref().map_or(0, |r| r.seen)));
    Ok(Report { choice, states })
}

fn count_versions(dir: &PrivateDir) -> (usize, u64) {
    let Ok(versions) = dir.open_sub_dir(super::VERSIONS) else {
        return (0, 0);
    };
    let Ok(files) = versions.files(1_000_000) else {
        return (0, 0);
    };
    files
        .iter()
        .fold((0, 0), |(n, bytes), (_, s)| (n + 1, bytes + s.len()))
}

/// Makes state `id` the state of `vault`; the state it had (if another) is detached, kept on
/// disk and listed, matched to no folder. Refuses a state whose own folder still exists
/// elsewhere unless `force`: two live vaults would share one history. Returns the state it
/// had.
pub(super) fn adopt(
    base: &PrivateDir,
    vault: &Vault,
    id: &str,
    force: bool,
) -> Result<Option<String>, StateError> {
    if !valid_id(id) {
        return Err(StateError::NotStateId(id.to_owned()));
    }
    let _registry = lock(base)?;
    let (records, legacy) = read_all(base)?;
    let target = records.iter().find(|r| r.id == id);
    if target.is_none() && !legacy.iter().any(|l| l == id) {
        return Err(StateError::NoSuchState(id.to_owned()));
    }
    let current = Current::of(vault)?;
    let probe = DiskProbe { vault };
    if let Some(t) = target
        && !current.is_folder_of(t)
        && !t.detached
        && probe.alive(t)
        && !force
    {
        return Err(StateError::Alive {
            id: id.to_owned(),
            path: t.path.clone(),
        });
    }
    let own = choose(&records, &legacy, &current, &probe).id;
    let mut previous = None;
    if let Some(own) = own.filter(|own| own != id) {
        let dir = base.open_sub_dir(&own)?;
        let mut record = match records.iter().find(|r| r.id == own) {
            Some(r) => r.clone(),
            None => record_of(vault, &own)?,
        };
        record.detached = true;
        write_record(&dir, &record)?;
        previous = Some(own);
    }
    let dir = base.open_sub_dir(id)?;
    write_record(&dir, &record_of(vault, id)?)?;
    Ok(previous)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        present: usize,
        alive: bool,
    }

    impl Probe for Fake {
        fn present(&self, _: &Record) -> usize {
            self.present
        }
        fn alive(&self, _: &Record) -> bool {
            self.alive
        }
    }

    fn current() -> Current {
        Current {
            path: "/home/u/Notes".into(),
            dev: 1,
            ino: 100,
            birth: Some("10.0".into()),
        }
    }

    fn record(id: &str, path: &str, ino: u64, notes: usize) -> Record {
        Record {
            id: id.into(),
            path: path.into(),
            dev: 1,
            ino,
            birth: Some("10.0".into()),
            notes: (0..notes).map(|i| format!("n{i}.md")).collect(),
            seen: 5,
            detached: false,
        }
    }

    const NONE: Fake = Fake {
        present: 0,
        alive: false,
    };

    #[test]
    fn a_restart_and_a_move_on_the_same_file_system_keep_the_state() {
        let same = choose(
            &[record("va", "/home/u/Notes", 100, 3)],
            &[],
            &current(),
            &NONE,
        );
        assert_eq!((same.id.as_deref(), same.how), (Some("va"), How::Same));
        let moved = choose(
            &[record("va", "/home/u/Old name", 100, 3)],
            &[],
            &current(),
            &NONE,
        );
        assert_eq!(moved.id.as_deref(), Some("va"));
        assert_eq!(
            moved.how,
            How::Moved {
                from: "/home/u/Old name".into()
            }
        );
    }

    #[test]
    fn a_folder_reusing_a_freed_inode_is_not_the_vault() {
        // Same device and inode, another birth time, another path: an unrelated folder.
        let mut r = record("va", "/home/u/Gone", 100, 3);
        r.birth = Some("9.0".into());
        let c = choose(&[r], &[], &current(), &NONE);
        assert_eq!((c.id, c.how), (None, How::New));
    }

    #[test]
    fn a_restore_to_the_same_path_keeps_the_state_when_its_notes_are_there() {
        let r = record("va", "/home/u/Notes", 7, 4);
        let half = Fake {
            present: 2,
            alive: false,
        };
        let c = choose(std::slice::from_ref(&r), &[], &current(), &half);
        assert_eq!(c.id.as_deref(), Some("va"));
        assert_eq!(
            c.how,
            How::Restored {
                present: 2,
                sampled: 4
            }
        );
        assert_eq!(c.notices.len(), 1, "a restore is reported");
    }

    #[test]
    fn an_unrelated_folder_at_the_same_path_starts_a_new_state_and_is_told() {
        let r = record("va", "/home/u/Notes", 7, 4);
        let one = Fake {
            present: 1,
            alive: false,
        };
        let c = choose(std::slice::from_ref(&r), &[], &current(), &one);
        assert_eq!((c.id, c.how), (None, How::New));
        assert!(c.notices[0].contains("--adopt va"), "{:?}", c.notices);
        // A record that sampled no note proves nothing either.
        let empty = record("vb", "/home/u/Notes", 7, 0);
        let c = choose(&[empty], &[], &current(), &one);
        assert_eq!(c.how, How::New);
    }

    #[test]
    fn a_copy_elsewhere_is_only_suggested_and_only_when_the_original_is_gone() {
        let r = record("va", "/mnt/old/Notes", 7, 10);
        let all_gone = Fake {
            present: 10,
            alive: false,
        };
        let c = choose(std::slice::from_ref(&r), &[], &current(), &all_gone);
        assert_eq!((c.id.clone(), c.how.clone()), (None, How::New));
        assert!(c.notices[0].contains("/mnt/old/Notes"), "{:?}", c.notices);
        let still_there = Fake {
            present: 10,
            alive: true,
        };
        let c = choose(std::slice::from_ref(&r), &[], &current(), &still_there);
        assert!(c.notices.is_empty(), "a live original is a copy: {c:?}");
        let few = Fake {
            present: 8,
            alive: false,
        };
        assert!(choose(&[r], &[], &current(), &few).notices.is_empty());
    }

    #[test]
    fn a_detached_record_matches_nothing_and_legacy_folders_are_upgraded() {
        let mut r = record("va", "/home/u/Notes", 100, 3);
        r.detached = true;
        let c = choose(&[r], &["1-64".into()], &current(), &NONE);
        assert_eq!((c.id.as_deref(), c.how), (Some("1-64"), How::Legacy));
    }

    #[test]
    fn state_folder_names_are_checked() {
        let id = new_id().unwrap();
        assert!(valid_id(&id), "{id}");
        assert_ne!(id, new_id().unwrap());
        for bad in ["", "v", "..", "1-", "-1", "1-2-3", "vzz", "v../x", "oauth"] {
            assert!(!valid_id(bad), "{bad}");
        }
        assert!(valid_id("803-1a2b"));
    }
}
