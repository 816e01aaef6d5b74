//! The file watcher: which places in the vault changed, as hints only.
//!
//! Watching is done by `notify` (inotify on Linux) on the vault root *handle*, addressed as
//! `/proc/self/fd/<root>`, so no host path is kept or used: the watch is on the same folder the
//! capability refers to, even if that folder is renamed while the server runs. Symlinks are not
//! followed (`notify` is told so; the walk that adds watches does not descend them).
//!
//! An event yields only a vault path to look at again. Nothing is read through the event's path:
//! the engine re-stats and re-reads through the capability layer, where every rule of
//! [`crate::vault`] applies (a symlink swapped in after the event leads nowhere). Paths that are
//! hidden or not valid vault paths are dropped here, so `.git` and `.obsidian` churn costs nothing.
//! Access events (our own reads open files) are ignored. A kernel queue overflow becomes a
//! [`Batch::Rescan`].

use std::collections::BTreeSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher as _};

use super::{Vault, VaultPath};

/// Most distinct paths remembered in one batch; beyond it the batch becomes a full rescan.
pub const MAX_BATCH_PATHS: usize = 10_000;

/// What the watcher reports.
#[derive(Debug)]
pub enum WatchMsg {
    /// These places changed (files or folders, created, modified, removed or renamed).
    Paths(Vec<VaultPath>),
    /// Events were lost: everything must be looked at again.
    Rescan,
    /// The watcher failed.
    Error(WatchError),
    /// The server is shutting down: stop waiting for events.
    Stop,
}

/// A debounced batch of changes.
#[derive(Debug, PartialEq, Eq)]
pub enum Batch {
    /// Reconcile these places.
    Paths(Vec<VaultPath>),
    /// Reconcile everything.
    Rescan,
    /// The watcher reported an error (reconcile everything).
    Error(WatchError),
}

/// A running watch; dropping it stops watching.
pub struct Watcher {
    _inner: notify::RecommendedWatcher,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// Why the watcher could not start, or what it reported failing later. Names no host path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The system's inotify limit on watched folders.
    #[error("the system limit on watched folders was reached (raise fs.inotify.max_user_watches)")]
    Limit,
    /// The vault folder no longer exists.
    #[error("the vault folder is gone")]
    Gone,
    /// The system refused (only the kind of failure is kept).
    #[error("watch failed: {0}")]
    Io(std::io::ErrorKind),
    /// A watch the watcher should hold is not there.
    #[error("watch not found")]
    WatchNotFound,
    /// The watcher refused its configuration.
    #[error("invalid watcher configuration")]
    Config,
    /// Another failure of the watcher.
    #[error("watch failed")]
    Failed,
}

impl From<&notify::Error> for WatchError {
    /// The error's kind, without the host paths `notify` attaches.
    fn from(e: &notify::Error) -> WatchError {
        match &e.kind {
            notify::ErrorKind::MaxFilesWatch => WatchError::Limit,
            notify::ErrorKind::PathNotFound => WatchError::Gone,
            notify::ErrorKind::Io(io) => WatchError::Io(io.kind()),
            notify::ErrorKind::WatchNotFound => WatchError::WatchNotFound,
            notify::ErrorKind::InvalidConfig(_) => WatchError::Config,
            notify::ErrorKind::Generic(_) => WatchError::Failed,
        }
    }
}

impl Watcher {
    /// Watches `vault` recursively, sending what changed to `tx`.
    pub fn start(vault: &Vault, tx: Sender<WatchMsg>) -> Result<Watcher, WatchError> {
        let root = super::sys::watch_root(&vault.root, vault.host_path())
            .map_err(|e| WatchError::Io(e.kind()))?;
        let prefix = root.clone();
        let handler = move |res: notify::Result<notify::Event>| {
            let msg = match res {
                Ok(ev) if ev.need_rescan() => WatchMsg::Rescan,
                Ok(ev) => {
                    if matches!(ev.kind, EventKind::Access(_)) {
                        return;
                    }
                    let paths: Vec<VaultPath> = ev
                        .paths
                        .iter()
                        .filter_map(|p| to_vault_path(&prefix, p))
                        .collect();
                    if paths.is_empty() {
                        return;
                    }
                    WatchMsg::Paths(paths)
                }
                Err(e) => WatchMsg::Error(WatchError::from(&e)),
            };
            let _ = tx.send(msg);
        };
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut inner =
            notify::RecommendedWatcher::new(handler, config).map_err(|e| WatchError::from(&e))?;
        inner
            .watch(&root, RecursiveMode::Recursive)
            .map_err(|e| WatchError::from(&e))?;
        Ok(Watcher { _inner: inner })
    }
}

/// The vault path an event path names, if it is one the vault serves.
fn to_vault_path(prefix: &std::path::Path, p: &std::path::Path) -> Option<VaultPath> {
    let rel = p.strip_prefix(prefix).ok()?;
    let rel = rel.to_str()?;
    if rel.is_empty() {
        return Some(VaultPath::root());
    }
    VaultPath::parse(rel).ok()
}

/// Groups events into batches: a batch closes after a quiet spell, or after a longest wait so a
/// steady stream of changes still gets applied.
#[derive(Debug, Clone, Copy)]
pub struct Debounce {
    /// Close the batch after this long without events.
    pub quiet: Duration,
    /// Close the batch this long after its first event, whatever happens.
    pub max_wait: Duration,
}

impl Default for Debounce {
    fn default() -> Self {
        Debounce {
            quiet: Duration::from_millis(100),
            max_wait: Duration::from_millis(500),
        }
    }
}

impl Debounce {
    /// Waits for the next batch; `None` once the channel is closed or a [`WatchMsg::Stop`] arrives.
    pub fn next_batch(&self, rx: &Receiver<WatchMsg>) -> Option<Batch> {
        let first = rx.recv().ok()?;
        if matches!(first, WatchMsg::Stop) {
            return None;
        }
        let started = Instant::now();
        let mut paths = BTreeSet::new();
        let mut rescan = false;
        let mut error = None;
        let take = |msg: WatchMsg,
                    paths: &mut BTreeSet<VaultPath>,
                    rescan: &mut bool,
                    error: &mut Option<WatchError>| match msg {
            WatchMsg::Paths(p) => {
                if !*rescan {
                    paths.extend(p);
                    if paths.len() > MAX_BATCH_PATHS {
                        *rescan = true;
                        paths.clear();
                    }
                }
            }
            WatchMsg::Rescan => {
                *rescan = true;
                paths.clear();
            }
            WatchMsg::Error(e) => *error = Some(e),
            // Handled by the callers of `take`.
            WatchMsg::Stop => {}
        };
        take(first, &mut paths, &mut rescan, &mut error);
        loop {
            let left = self.max_wait.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            match rx.recv_timeout(self.quiet.min(left)) {
                Ok(WatchMsg::Stop) => break,
                Ok(msg) => take(msg, &mut paths, &mut rescan, &mut error),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        Some(if let Some(e) = error {
            Batch::Error(e)
        } else if rescan {
            Batch::Rescan
        } else {
            Batch::Paths(paths.into_iter().collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn event_paths_become_vault_paths_and_hidden_ones_are_dropped() {
        let prefix = Path::new("/proc/self/fd/7/.");
        let p = |s: &str| to_vault_path(prefix, Path::new(s));
        assert_eq!(p("/proc/self/fd/7/./A/b.md").unwrap().as_str(), "A/b.md");
        assert_eq!(p("/proc/self/fd/7/A/b.md").unwrap().as_str(), "A/b.md");
        assert!(p("/proc/self/fd/7").unwrap().is_root());
        assert_eq!(p("/proc/self/fd/7/.git/index"), None);
        assert_eq!(p("/proc/self/fd/7/A/.obsidian/x.json"), None);
        assert_eq!(p("/etc/passwd"), None);
        assert_eq!(p("/proc/self/fd/70/x.md"), None);
    }

    #[test]
    fn watcher_errors_keep_their_messages_and_drop_host_paths() {
        let limit = notify::Error::new(notify::ErrorKind::MaxFilesWatch)
            .add_path(std::path::PathBuf::from("/home/someone/vault"));
        let e = WatchError::from(&limit);
        assert_eq!(e, WatchError::Limit);
        assert!(e.to_string().contains("fs.inotify.max_user_watches"), "{e}");
        let io = notify::Error::io(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
            .add_path(std::path::PathBuf::from("/home/someone/vault"));
        let e = WatchError::from(&io).to_string();
        assert!(e.starts_with("watch failed: "), "{e}");
        assert!(!e.contains("/home"), "{e}");
    }

    #[test]
    fn bursts_are_batched_and_overflow_becomes_a_rescan() {
        let (tx, rx) = std::sync::mpsc::channel();
        let v = |s: &str| VaultPath::parse(s).unwrap();
        tx.send(WatchMsg::Paths(vec![v("a.md")])).unwrap();
        tx.send(WatchMsg::Paths(vec![v("b.md"), v("a.md")]))
            .unwrap();
        let d = Debounce {
            quiet: Duration::from_millis(20),
            max_wait: Duration::from_millis(200),
        };
        assert_eq!(
            d.next_batch(&rx),
            Some(Batch::Paths(vec![v("a.md"), v("b.md")]))
        );
        tx.send(WatchMsg::Paths(vec![v("c.md")])).unwrap();
        tx.send(WatchMsg::Rescan).unwrap();
        tx.send(WatchMsg::Paths(vec![v("d.md")])).unwrap();
        assert_eq!(d.next_batch(&rx), Some(Batch::Rescan));
        let many: Vec<VaultPath> = (0..=MAX_BATCH_PATHS)
            .map(|i| v(&format!("{i}.md")))
            .collect();
        tx.send(WatchMsg::Paths(many)).unwrap();
        assert_eq!(d.next_batch(&rx), Some(Batch::Rescan));
        drop(tx);
        assert_eq!(d.next_batch(&rx), None);
    }
}
