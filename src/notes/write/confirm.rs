//! What `--confirm destructive` keeps between a question to the person and the answer, and who
//! made a change (for the audit log).
//!
//! A destructive call waits for the person's yes. A client with elicitation asks them: in one
//! request on an older protocol, or (2026-07-28, which forbids requests from the server) by
//! returning the question and taking the answer with the call's retry, which names the question
//! by an id kept here ([`Confirmations::ask`], [`Confirmations::answer`]): single use, bound to
//! the call's arguments and credential, gone after [`ASK_TTL`].
//!
//! A client without elicitation is refused, and the request waits in the state folder
//! (`confirm/pending.json`) for `capvault confirm`, which the person runs on the machine (from
//! a terminal: it will not read a yes from a pipe). The same call made again finds the yes and
//! goes ahead once ([`Confirmations::take_approved`]).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::vault::private::PrivateDir;
use crate::vault::state::StateDir;

/// How long a question to a client waits for its answer.
pub const ASK_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a request waits in the state folder for `capvault confirm`, and a yes for the call
/// made again.
pub const PENDING_TTL: Duration = Duration::from_secs(15 * 60);
/// Most questions open at once (the oldest is forgotten first).
const MAX_ASKED: usize = 64;
/// Most requests waiting in the state folder.
const MAX_PENDING: usize = 32;
/// Largest `pending.json` read.
const MAX_PENDING_BYTES: u64 = 256 * 1024;
/// The state folder's sub-folder and its files.
const FOLDER: &str = "confirm";
const FILE: &str = "pending.json";
const LOCK: &str = "pending.lock";

/// A call's identity: the tool, its arguments and the credential, hashed (`sha256` hex).
pub type Digest = String;

/// Why an answer is not taken ([`Confirmations::answer`]).
#[derive(Debug, PartialEq, Eq)]
pub enum NotAsked {
    /// No open question by that id: made up, expired or used.
    Unknown,
    /// The question was about another call, or about this one before the vault changed: what
    /// the person was shown (the summary).
    Changed(String),
}

/// What became of a call made again without the person's answer
/// ([`Confirmations::take_approved`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Approval {
    /// The person approved it with `capvault confirm`: it goes ahead, once.
    Approved,
    /// It waits in the state folder for `capvault confirm`, under this code.
    Waiting(String),
}

/// One open question to a client.
#[derive(Debug)]
struct Asked {
    id: String,
    digest: Digest,
    summary: String,
    at: Instant,
}

/// The questions open and the state folder's waiting requests of one vault.
#[derive(Debug)]
pub struct Confirmations {
    asked: Mutex<VecDeque<Asked>>,
    /// The state folder's `confirm/` files, opened once (a failure is kept, and told each time).
    files: OnceLock<Result<PrivateDir, Arc<io::Error>>>,
}

/// One request waiting for `capvault confirm` (a line of `pending.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Pending {
    /// What the person types or sees: 8 letters and digits, easy to read.
    pub code: String,
    /// The call's [`Digest`].
    pub digest: Digest,
    /// What will change, in one or a few lines (vault-relative paths only).
    pub summary: String,
    /// When it was asked (seconds since the epoch).
    pub asked: u64,
    /// The person said yes.
    #[serde(default)]
    pub approved: bool,
    /// The vault paths the change acts on that must still exist (a note to delete, a folder
    /// to move): when one is gone, the request is dropped instead of asked about.
    #[serde(default)]
    pub needs: Vec<String>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `n` random characters from an alphabet without look-alikes (no 0/O, 1/I/L).
fn random_code(n: usize) -> io::Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("no randomness: {e}")))?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect())
}

impl Default for Confirmations {
    fn default() -> Self {
        Confirmations {
            asked: Mutex::new(VecDeque::new()),
            files: OnceLock::new(),
        }
    }
}

impl Confirmations {
    /// Opens a question for the call `digest` about `summary`: its id, which the client echoes
    /// back.
    pub fn ask(&self, digest: &str, summary: &str) -> io::Result<String> {
        let id = random_code(24)?;
        let mut asked = crate::locks::lock(&self.asked);
        asked.retain(|a| a.at.elapsed() < ASK_TTL);
        if asked.len() >= MAX_ASKED {
            asked.pop_front();
        }
        asked.push_back(Asked {
            id: id.clone(),
            digest: digest.to_owned(),
            summary: summary.to_owned(),
            at: Instant::now(),
        });
        Ok(id)
    }

    /// Closes the question `id`: its summary when it was open, fresh, and asked for the call
    /// `digest`. Whatever the result, `id` cannot be used again.
    pub fn answer(&self, id: &str, digest: &str) -> Result<String, NotAsked> {
        let mut asked = crate::locks::lock(&self.asked);
        let i = asked
            .iter()
            .position(|a| a.id == id)
            .ok_or(NotAsked::Unknown)?;
        let a = asked.remove(i).ok_or(NotAsked::Unknown)?;
        if a.at.elapsed() >= ASK_TTL {
            Err(NotAsked::Unknown)
        } else if a.digest != digest {
            Err(NotAsked::Changed(a.summary))
        } else {
            Ok(a.summary)
        }
    }

    fn files<'a>(&'a self, state: &StateDir) -> io::Result<&'a PrivateDir> {
        self.files
            .get_or_init(|| state.private_files(FOLDER).map_err(Arc::new))
            .as_ref()
            .map_err(|e| io::Error::new(e.kind(), Arc::clone(e)))
    }

    /// The call `digest` made again: true (once) when the person approved it with `capvault
    /// confirm`; otherwise it is left (or put) waiting with `summary` and the paths it `needs`,
    /// and its code returned.
    pub fn take_approved(
        &self,
        state: &StateDir,
        digest: &str,
        summary: &str,
        needs: &[String],
    ) -> io::Result<Approval> {
        let files = self.files(state)?;
        update(files, |pending| {
            if let Some(i) = pending.iter().position(|p| p.digest == digest) {
                if pending[i].approved {
                    pending.remove(i);
                    return Ok(Approval::Approved);
                }
                return Ok(Approval::Waiting(pending[i].code.clone()));
            }
            if pending.len() >= MAX_PENDING {
                pending.remove(0);
            }
            let code = random_code(8)?;
            pending.push(Pending {
                code: code.clone(),
                digest: digest.to_owned(),
                summary: summary.to_owned(),
                asked: now_secs(),
                approved: false,
                needs: needs.to_vec(),
            });
            Ok(Approval::Waiting(code))
        })
    }
}

/// Reads `pending.json` under its lock, drops what has expired, lets `f` change the list and
/// writes it back when it changed.
pub fn update<T>(
    files: &PrivateDir,
    f: impl FnOnce(&mut Vec<Pending>) -> io::Result<T>,
) -> io::Result<T> {
    let _held = files.lock(LOCK, Duration::from_secs(5))?;
    let before = read(files)?;
    let mut pending = before.clone();
    let now = now_secs();
    pending.retain(|p| now.saturating_sub(p.asked) < PENDING_TTL.as_secs());
    let out = f(&mut pending)?;
    if pending != before {
        let bytes = serde_json::to_vec_pretty(&pending).map_err(io::Error::other)?;
        files.replace(FILE, &bytes)?;
    }
    Ok(out)
}

fn read(files: &PrivateDir) -> io::Result<Vec<Pending>> {
    match files.read(FILE, MAX_PENDING_BYTES)? {
        None => Ok(Vec::new()),
        // A damaged file is started again: what waited is asked again on the next call.
        Some(bytes) => Ok(serde_json::from_slice(&bytes).unwrap_or_default()),
    }
}

/// The state folder's waiting requests (for `capvault confirm`).
pub fn pending_files(state: &StateDir) -> io::Result<PrivateDir> {
    state.private_files(FOLDER)
}

/// Who makes the calls of one request: the client's name and the credential (over HTTP), for
/// the audit log, with the paths it read shortly before.
#[derive(Debug, Clone, Default)]
pub struct Actor {
    /// The client's name and version, as it gave them.
    pub client: Option<String>,
    /// The credential's id (a token's name or an OAuth grant), never the secret.
    pub credential: Option<String>,
    /// The notes read by the same client and credential in the minutes before, newest last.
    pub read_before: Vec<String>,
}

thread_local! {
    static ACTOR: std::cell::RefCell<Option<Actor>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `actor` as the one making its changes (the audit log names it).
pub fn as_actor<T>(actor: Option<Actor>, f: impl FnOnce() -> T) -> T {
    let before = ACTOR.with(|a| a.replace(actor));
    let out = f();
    ACTOR.with(|a| *a.borrow_mut() = before);
    out
}

/// The actor [`as_actor`] set on this thread.
pub(super) fn current_actor() -> Option<Actor> {
    ACTOR.with(|a| a.borrow().clone())
}

/// Most paths remembered per client and credential.
const MAX_READS: usize = 20;
/// Reads older than this are not "just before" a change.
const READS_TTL: Duration = Duration::from_secs(10 * 60);
/// Most clients and credentials remembered.
const MAX_READERS: usize = 64;

/// One client's and credential's reads: when, and the path.
type Reader = (String, VecDeque<(Instant, String)>);

/// The notes each client and credential read lately (paths only).
#[derive(Debug, Default)]
pub struct Reads {
    by: Mutex<VecDeque<Reader>>,
}

impl Reads {
    /// `who` read `path`.
    pub fn record(&self, who: &str, path: &str) {
        let mut by = crate::locks::lock(&self.by);
        let i = match by.iter().position(|(w, _)| w == who) {
            Some(i) => i,
            None => {
                if by.len() >= MAX_READERS {
                    by.pop_front();
                }
                by.push_back((who.to_owned(), VecDeque::new()));
                by.len() - 1
            }
        };
        let reads = &mut by[i].1;
        reads.retain(|(_, p)| p != path);
        if reads.len() >= MAX_READS {
            reads.pop_front();
        }
        reads.push_back((Instant::now(), path.to_owned()));
    }

    /// What `who` read in the last minutes, oldest first.
    pub fn recent(&self, who: &str) -> Vec<String> {
        let by = crate::locks::lock(&self.by);
        by.iter()
            .find(|(w, _)| w == who)
            .map(|(_, reads)| {
                reads
                    .iter()
                    .filter(|(at, _)| at.elapsed() < READS_TTL)
                    .map(|(_, p)| p.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_taken_once_and_only_for_the_call_it_was_asked_for() {
        let c = Confirmations::default();
        let id = c.ask("call-a", "A").unwrap();
        assert_eq!(
            c.answer(&id, "call-b"),
            Err(NotAsked::Changed("A".to_owned())),
            "another call's answer"
        );
        assert_eq!(
            c.answer(&id, "call-a"),
            Err(NotAsked::Unknown),
            "a wrong try closes the question"
        );
        let id = c.ask("call-a", "A").unwrap();
        assert_eq!(c.answer(&id, "call-a"), Ok("A".to_owned()));
        assert_eq!(c.answer(&id, "call-a"), Err(NotAsked::Unknown), "used once");
        assert_eq!(c.answer("made-up", "call-a"), Err(NotAsked::Unknown));
    }

    #[test]
    fn reads_are_kept_per_client_bounded_and_without_repeats() {
        let r = Reads::default();
        for i in 0..30 {
            r.record("a", &format!("n{i}.md"));
        }
        r.record("a", "n29.md");
        r.record("b", "other.md");
        let a = r.recent("a");
        assert_eq!(a.len(), MAX_READS);
        assert_eq!(a.last().map(String::as_str), Some("n29.md"));
        assert_eq!(r.recent("b"), vec!["other.md".to_owned()]);
        assert!(r.recent("c").is_empty());
    }
}
