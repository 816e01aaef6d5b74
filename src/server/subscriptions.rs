//! Change notifications, from the change log ([`crate::engine::changes`]):
//! `notifications/resources/updated` for the notes a session subscribed to and
//! `notifications/resources/list_changed` when notes are added, removed or moved; through
//! `resources/subscribe` in sessions (2025-11-25 and before) and through a
//! `subscriptions/listen` request (2026-07-28, for stateless clients too), which may also ask
//! for `notifications/prompts/list_changed` (`watch_prompts`).
//!
//! One task per session and vault waits for the engine's reconciles (a burst of saves is one
//! reconcile after the watcher's quiet time, and the task settles briefly again), reads the log
//! entries since it last looked and sends one notification per subscribed note changed and one
//! `list_changed`. It awaits each send: a client that does not read stalls only its own task,
//! whose wake-ups coalesce meanwhile (a `watch` channel holds one mark, not a queue). It ends with
//! the session (or the listen request), and holds the engine only weakly. A session subscribes
//! to [`MAX_SUBSCRIPTIONS`] notes at most.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::{ErrorData, RoleServer};
use tokio_util::sync::CancellationToken;

use super::resources::{URI_PREFIX, uri_for};
use super::{CapvaultServer, Grant};
use crate::engine::Engine;
use crate::engine::changes::ChangeKind;
use crate::locks::lock;
use crate::vault::{VaultPath, is_note_name};

/// Most notes one session (or one listen request) subscribes to.
pub const MAX_SUBSCRIPTIONS: usize = 1000;
/// Longest URI accepted in a subscription.
const MAX_URI: usize = 2048;
/// How long a task waits after a reconcile for the next one of the same burst.
const SETTLE: Duration = Duration::from_millis(30);
/// How often a waiting task checks that its session is still there.
const ALIVE_CHECK: Duration = Duration::from_secs(1);
/// Most log entries one round reads (a larger burst is a list change and the rest is skipped).
const MAX_ROUND: usize = 100_000;

/// One vault as a session sees it: its engine and how its notes' URIs are spelled.
#[derive(Clone)]
pub(super) struct Watched {
    pub engine: Arc<Engine>,
    /// The vault's name in a server of several (`capvault://NAME/path`), else `None`.
    pub vault: Option<String>,
    /// Its prompts are offered and change with its prompts folder.
    pub prompts_change: bool,
}

impl Watched {
    /// The URI of a note, as `resources/list` spells it.
    pub fn uri(&self, p: &VaultPath) -> String {
        let one = uri_for(p);
        match &self.vault {
            None => one,
            Some(name) => format!(
                "capvault://{name}/{}",
                one.strip_prefix(URI_PREFIX).unwrap_or(&one)
            ),
        }
    }
}

/// The notes a session subscribed to: each as `resources/list` spells it, to the URI the
/// client gave (which the notification repeats).
#[derive(Debug, Default)]
pub(super) struct Subscribed {
    uris: Mutex<HashMap<String, String>>,
    /// True once the session's notification tasks run.
    running: AtomicBool,
}

impl Subscribed {
    /// Adds one; refused past [`MAX_SUBSCRIPTIONS`].
    pub fn add(&self, canonical: String, given: String) -> Result<(), ErrorData> {
        let mut uris = lock(&self.uris);
        if uris.len() >= MAX_SUBSCRIPTIONS && !uris.contains_key(&canonical) {
            return Err(ErrorData::invalid_params(
                format!("a session subscribes to at most {MAX_SUBSCRIPTIONS} notes"),
                None,
            ));
        }
        uris.insert(canonical, given);
        Ok(())
    }

    /// Removes one (by either spelling).
    pub fn remove(&self, canonical: &str) {
        lock(&self.uris).remove(canonical);
    }

    /// True the first time it is asked: the caller starts the tasks.
    pub fn start(&self) -> bool {
        !self.running.swap(true, Ordering::AcqRel)
    }

    fn of(uris: impl IntoIterator<Item = (String, String)>) -> Subscribed {
        Subscribed {
            uris: Mutex::new(uris.into_iter().collect()),
            running: AtomicBool::new(true),
        }
    }
}

/// Where a task's notifications go.
#[derive(Clone)]
enum Sink {
    Session(Peer<RoleServer>),
    Listen(SubscriptionSink),
}

impl Sink {
    async fn updated(&self, uri: String) -> bool {
        match self {
            Sink::Session(p) => p
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .is_ok(),
            Sink::Listen(s) => s.notify_resource_updated(uri).await.is_ok(),
        }
    }

    async fn list_changed(&self) -> bool {
        match self {
            Sink::Session(p) => p.notify_resource_list_changed().await.is_ok(),
            Sink::Listen(s) => s.notify_resource_list_changed().await.is_ok(),
        }
    }

    async fn prompts_changed(&self) -> bool {
        match self {
            Sink::Session(p) => p.notify_prompt_list_changed().await.is_ok(),
            Sink::Listen(s) => s.notify_prompt_list_changed().await.is_ok(),
        }
    }

    fn closed(&self) -> bool {
        match self {
            Sink::Session(p) => p.is_transport_closed(),
            Sink::Listen(_) => false,
        }
    }
}

/// Starts a session's tasks (one per vault): `list_changed` always, `updated` for the notes in
/// `subs` as it changes.
pub(super) fn spawn_session(watched: Vec<Watched>, peer: Peer<RoleServer>, subs: Arc<Subscribed>) {
    for w in watched {
        let sink = Sink::Session(peer.clone());
        let subs = Arc::clone(&subs);
        tokio::spawn(watch(w, sink, subs, true, CancellationToken::new()));
    }
}

/// Runs one `subscriptions/listen` request until it is cancelled: what `accepted` names, for
/// every vault in `watched`.
pub(super) async fn listen(
    watched: Vec<Watched>,
    sink: SubscriptionSink,
    accepted: &SubscriptionFilter,
    stop: CancellationToken,
) {
    let list_changed = accepted.resources_list_changed == Some(true);
    let mut per_vault: Vec<Vec<(String, String)>> = vec![Vec::new(); watched.len()];
    for uri in accepted.resource_subscriptions.iter().flatten() {
        if let Some((i, canonical)) = canonical(&watched, uri) {
            per_vault[i].push((canonical, uri.clone()));
        }
    }
    // Spawned as a session's are (the same tasks), and aborted when the request ends.
    let mut tasks: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    if accepted.prompts_list_changed == Some(true) {
        for w in watched.iter().filter(|w| w.prompts_change) {
            tasks.push(tokio::spawn(watch_prompts(
                Arc::downgrade(&w.engine),
                w.engine.watch_changes(),
                Sink::Listen(sink.clone()),
                stop.clone(),
            )));
        }
    }
    for (w, uris) in watched.into_iter().zip(per_vault) {
        let subs = Arc::new(Subscribed::of(uris));
        tasks.push(tokio::spawn(watch(
            w,
            Sink::Listen(sink.clone()),
            subs,
            list_changed,
            stop.clone(),
        )));
    }
    let aborts: Vec<tokio::task::AbortHandle> = tasks.iter().map(|t| t.abort_handle()).collect();
    tokio::select! {
        () = stop.cancelled() => {}
        () = async {
            for t in tasks {
                let _ = t.await;
            }
        } => {}
    }
    for a in aborts {
        a.abort();
    }
}

impl CapvaultServer {
    /// Once a session of one vault is initialized, tells it when the prompts offered change (a
    /// prompt note added, removed, renamed or its frontmatter edited), until its session ends or
    /// the engine is dropped: a burst of changes is one notification. Holds the engine weakly.
    pub(super) async fn one_on_initialized(
        &self,
        context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        if self.prompts_offered() && self.engine.options().prompts.folder.is_some() {
            tokio::spawn(watch_prompts(
                Arc::downgrade(&self.engine),
                self.engine.watch_changes(),
                Sink::Session(context.peer),
                CancellationToken::new(),
            ));
        }
    }
}

/// Sends `prompts/list_changed` each time the prompts offered change (a prompt note added,
/// removed, renamed or its frontmatter edited; a burst is one), until the session, `stop` or
/// the engine ends.
async fn watch_prompts(
    weak: Weak<Engine>,
    mut changes: tokio::sync::watch::Receiver<u64>,
    sink: Sink,
    stop: CancellationToken,
) {
    let mut last = super::prompts::fingerprint(&weak).await;
    while next_round(&mut changes, &sink, &stop, super::prompts::SETTLE).await {
        let now = super::prompts::fingerprint(&weak).await;
        if now.is_some() && now != last {
            last = now;
            if !sink.prompts_changed().await {
                return;
            }
        }
    }
}

/// Which vault of `watched` a URI names and its spelling in `resources/list`, if it names a
/// note path allowed there (whether or not the note exists: what unsubscribing takes).
pub(super) fn canonical(watched: &[Watched], uri: &str) -> Option<(usize, String)> {
    let (i, path) = vault_path(watched, uri)?;
    Some((i, watched[i].uri(&path)))
}

/// [`canonical`], for a URI that may be subscribed to: a note (`.md`) that exists and is
/// reached inside the vault, as a read reaches it (an in-vault symlink that leads out, a
/// hidden or excluded path are refused), as `resources/list` lists it. Reads the note's
/// metadata.
pub(super) fn subscribable(watched: &[Watched], uri: &str) -> Option<(usize, String)> {
    let (i, path) = vault_path(watched, uri)?;
    let w = &watched[i];
    let note = is_note_name(path.file_name()) && w.engine.vault().stat_file(&path).is_ok();
    note.then(|| (i, w.uri(&path)))
}

/// Which vault of `watched` a URI names and the path in it, if it names a path allowed there.
fn vault_path(watched: &[Watched], uri: &str) -> Option<(usize, VaultPath)> {
    if uri.len() > MAX_URI {
        return None;
    }
    for (i, w) in watched.iter().enumerate() {
        let inner = match &w.vault {
            None => uri.to_owned(),
            Some(name) => {
                let rest = uri.strip_prefix("capvault://")?;
                let (authority, path) = rest.split_once('/')?;
                let decoded = percent_encoding::percent_decode_str(authority)
                    .decode_utf8()
                    .ok()?;
                if decoded != name.as_str() {
                    continue;
                }
                format!("{URI_PREFIX}{path}")
            }
        };
        let path = super::resources::path_from_uri(&inner).ok()?;
        if w.engine.vault().exclusions().excludes(path.as_str()) {
            return None;
        }
        return Some((i, path));
    }
    None
}

/// Waits for the engine's next reconcile that changed something, then `settle` more (a burst is
/// one round); false once the session, `stop` or the engine has ended.
async fn next_round(
    changes: &mut tokio::sync::watch::Receiver<u64>,
    sink: &Sink,
    stop: &CancellationToken,
    settle: Duration,
) -> bool {
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return false;
                }
                break;
            }
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(ALIVE_CHECK) => {
                if sink.closed() {
                    return false;
                }
            }
        }
    }
    tokio::time::sleep(settle).await;
    changes.borrow_and_update();
    !(sink.closed() || stop.is_cancelled())
}

/// Sends what each reconcile of `w`'s engine means for `subs`, until the session or `stop` ends.
async fn watch(
    w: Watched,
    sink: Sink,
    subs: Arc<Subscribed>,
    list_changed: bool,
    stop: CancellationToken,
) {
    let mut changes = w.engine.watch_changes();
    let mut after = w.engine.change_log().bounds().0;
    let vault = w.vault.clone();
    let weak: Weak<Engine> = Arc::downgrade(&w.engine);
    drop(w);
    while next_round(&mut changes, &sink, &stop, SETTLE).await {
        let Some(engine) = weak.upgrade() else { return };
        let w = Watched {
            engine,
            vault: vault.clone(),
            prompts_change: false,
        };
        let (updated, listed) = round(&w, &mut after, &subs);
        drop(w);
        for uri in updated {
            if !sink.updated(uri).await {
                return;
            }
        }
        if listed && list_changed && !sink.list_changed().await {
            return;
        }
    }
}

/// The subscribed URIs changed since entry `after`, and whether notes were added, removed or
/// moved; moves `after` to the log's last entry. Paths out of sight (excluded) count for
/// nothing.
fn round(w: &Watched, after: &mut u64, subs: &Subscribed) -> (Vec<String>, bool) {
    let log = w.engine.change_log();
    let entries = log.entries_after(*after, MAX_ROUND);
    let Some(last) = entries.last().map(|e| e.seq) else {
        return (Vec::new(), false);
    };
    let complete = entries.len() < MAX_ROUND;
    *after = if complete { last } else { log.bounds().0 };
    let ignored = w.engine.user_ignored();
    let exclusions = w.engine.vault().exclusions();
    let visible = |p: &VaultPath| {
        !exclusions.excludes(p.as_str()) && !ignored.as_ref().is_some_and(|f| f.matches(p.as_str()))
    };
    let uris = lock(&subs.uris);
    let mut updated: Vec<String> = Vec::new();
    let mut listed = !complete;
    for e in &entries {
        for p in std::iter::once(&e.path).chain(e.from.as_ref()) {
            if !visible(p) {
                continue;
            }
            if e.kind != ChangeKind::Changed {
                listed = true;
            }
            if uris.is_empty() {
                continue;
            }
            if let Some(given) = uris.get(&w.uri(p))
                && !updated.contains(given)
            {
                updated.push(given.clone());
            }
        }
    }
    (updated, listed)
}

/// The error for a resource URI that names no note this request may see.
pub(super) fn unknown_uri(uri: &str) -> ErrorData {
    let data = (uri.len() <= 2048).then(|| serde_json::json!({ "uri": uri }));
    ErrorData::invalid_params(
        "unknown resource URI: subscribe to a note's URI as resources/list gives it",
        data,
    )
}

impl CapvaultServer {
    /// The vaults this request may see, as change notifications watch them.
    pub(super) fn watched(&self, grant: Option<&Grant>) -> Vec<Watched> {
        match &self.set {
            Some(set) => set.watched(grant),
            None => vec![Watched {
                engine: Arc::clone(&self.engine),
                vault: None,
                prompts_change: self.prompts_offered()
                    && self.engine.options().prompts.folder.is_some(),
            }],
        }
    }
}
