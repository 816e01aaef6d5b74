//! What the built-in authorization server keeps, in the `oauth` folder of capvault's state
//! folder: the owner's passphrase (an argon2id hash, `passphrase`), the registered clients and
//! the grants (`grants.json`). No secret is stored: client secrets, access tokens and refresh
//! tokens are kept as SHA-256 digests (they are 256-bit random values, so a digest is enough;
//! the passphrase, chosen by a person, gets argon2).
//!
//! A grant is one client's approval, with its current refresh token, the refresh tokens it
//! used before (so reuse of one is noticed and revokes the grant: the token family) and its
//! live access tokens. Every change takes the folder's lock, reads the file afresh, changes it
//! and replaces it whole, so `capvault tokens revoke` and a running server never lose each
//! other's changes; a running server re-reads the file when it changed, so a revocation holds
//! from the next request.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::vault::private::{PrivateDir, Stamp};

const GRANTS: &str = "grants.json";
const PASSPHRASE: &str = "passphrase";
const LOCK: &str = "oauth.lock";
/// The largest `grants.json` read.
const MAX_FILE: u64 = 8 * 1024 * 1024;
/// Registered clients kept at most (the oldest without a grant go first).
pub const MAX_CLIENTS: usize = 200;
/// Grants kept at most (a new one beyond it is refused).
pub const MAX_GRANTS: usize = 500;
/// Live access tokens per grant (the oldest go first).
const MAX_ACCESS_PER_GRANT: usize = 20;
/// Earlier refresh tokens remembered per grant, to notice their reuse.
const MAX_USED_PER_GRANT: usize = 64;
/// How long an access token lasts.
pub const ACCESS_TTL: Duration = Duration::from_secs(3600);
/// How long a refresh token lasts (each refresh issues a new one).
pub const REFRESH_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Shortest passphrase `capvault passwd` accepts.
pub const MIN_PASSPHRASE: usize = 12;

/// A registered client.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Client {
    pub id: String,
    /// The digest of its secret (hex), for confidential clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub name: String,
    pub redirect_uris: Vec<String>,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub auth_method: String,
    pub created: u64,
}

/// One token: its digest (hex) and when it expires (seconds since the epoch).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Token {
    digest: String,
    expires: u64,
}

/// One client's approval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GrantRecord {
    pub id: String,
    pub client_id: String,
    pub client_name: String,
    /// May call the write tools (`vault:write`).
    pub write: bool,
    /// Only these vaults of a server of several (the owner's choice on the consent page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vaults: Option<Vec<String>>,
    pub created: u64,
    pub last_refresh: u64,
    refresh: Option<Token>,
    #[serde(default)]
    used_refresh: Vec<String>,
    #[serde(default)]
    access: Vec<Token>,
}

impl GrantRecord {
    /// When its refresh token expires (0: none).
    pub fn expires(&self) -> u64 {
        self.refresh.as_ref().map_or(0, |t| t.expires)
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Data {
    #[serde(default)]
    clients: Vec<Client>,
    #[serde(default)]
    grants: Vec<GrantRecord>,
}

/// What an access token gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub grant: String,
    pub write: bool,
    /// Only these vaults, when set.
    pub vaults: Option<Vec<String>>,
    /// The client the grant was given to.
    pub client: String,
}

/// Freshly issued tokens.
#[derive(Debug)]
pub struct Issued {
    pub access: String,
    pub refresh: String,
    pub write: bool,
    pub grant: String,
}

/// Why a refresh was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum RefreshError {
    /// Unknown, expired, for another client: `invalid_grant`.
    Invalid,
    /// An earlier refresh token of a grant came back: the grant is revoked.
    Reused,
    /// More than the grant allows (`vault:write` asked of a read grant): `invalid_scope`.
    Scope,
}

/// What a revocation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// The grant is gone.
    Yes,
    /// No live grant holds the token.
    Unknown,
    /// The token belongs to another client's grant: nothing was revoked.
    OtherClient,
}

/// The store, with its in-memory copy.
pub struct Store {
    files: PrivateDir,
    cache: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    stamp: Option<Stamp>,
    /// Access token digest -> what it gives, and when it expires.
    access: HashMap<[u8; 32], (Access, u64)>,
    clients: Arc<Vec<Client>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store(..)")
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A fresh random secret: `prefix` and 32 random bytes in URL-safe base64.
pub fn random_secret(prefix: &str) -> io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("no randomness: {e}")))?;
    Ok(format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// The SHA-256 digest of a secret.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// A 32-byte digest from 64 hex digits.
pub(super) fn unhex(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    match base16ct::mixed::decode(s, &mut out) {
        Ok(d) if d.len() == 32 => Some(out),
        _ => None,
    }
}

fn corrupt(e: serde_json::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("oauth/{GRANTS} is damaged ({e}); `capvault tokens revoke --all` starts afresh"),
    )
}

impl Store {
    /// The store in `files` (nothing is read until it is used).
    pub fn new(files: PrivateDir) -> Store {
        Store {
            files,
            cache: Mutex::new(Cached::default()),
        }
    }

    /// The folder, for the sandbox's rules.
    pub fn files(&self) -> &PrivateDir {
        &self.files
    }

    /// True when the owner has set a passphrase.
    pub fn has_passphrase(&self) -> bool {
        self.files.stamp(PASSPHRASE).is_some()
    }

    /// Stores `passphrase` as an argon2id hash (a fresh salt), replacing any earlier one.
    pub fn set_passphrase(&self, passphrase: &str) -> io::Result<()> {
        if passphrase.chars().count() < MIN_PASSPHRASE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a passphrase needs at least {MIN_PASSPHRASE} characters"),
            ));
        }
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt).map_err(|e| io::Error::other(format!("no randomness: {e}")))?;
        let salt = SaltString::encode_b64(&salt).map_err(|e| io::Error::other(e.to_string()))?;
        let hash = argon2::Argon2::default()
            .hash_password(passphrase.as_bytes(), &salt)
            .map_err(|e| io::Error::other(e.to_string()))?
            .to_string();
        let _lock = self.files.lock(LOCK, Duration::from_secs(5))?;
        self.files
            .replace(PASSPHRASE, format!("{hash}\n").as_bytes())
    }

    /// True when `passphrase` is the owner's (slow on purpose: argon2).
    pub fn verify_passphrase(&self, passphrase: &str) -> io::Result<bool> {
        let Some(bytes) = self.files.read(PASSPHRASE, 4096)? else {
            return Ok(false);
        };
        let text = String::from_utf8_lossy(&bytes);
        let hash = PasswordHash::new(text.trim())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        Ok(argon2::Argon2::default()
            .verify_password(passphrase.as_bytes(), &hash)
            .is_ok())
    }

    fn load(&self) -> io::Result<Data> {
        match self.files.read(GRANTS, MAX_FILE)? {
            None => Ok(Data::default()),
            Some(bytes) => serde_json::from_slice(&bytes).map_err(corrupt),
        }
    }

    /// Brings the in-memory copy up to date with the file (a stat when nothing changed).
    fn refresh(&self) -> io::Result<std::sync::MutexGuard<'_, Cached>> {
        let mut cache = crate::locks::lock(&self.cache);
        let stamp = self.files.stamp(GRANTS);
        if stamp != cache.stamp || stamp.is_none() && !cache.access.is_empty() {
            let data = self.load()?;
            *cache = Cached::from_data(&data, stamp);
        }
        Ok(cache)
    }

    /// Changes the data under the lock, prunes what expired, and writes it back.
    fn update<R>(&self, change: impl FnOnce(&mut Data, u64) -> R) -> io::Result<R> {
        let _lock = self.files.lock(LOCK, Duration::from_secs(5))?;
        let mut data = self.load()?;
        let t = now();
        let out = change(&mut data, t);
        prune(&mut data, t);
        let bytes = serde_json::to_vec_pretty(&data).map_err(io::Error::other)?;
        self.files.replace(GRANTS, &bytes)?;
        let mut cache = crate::locks::lock(&self.cache);
        *cache = Cached::from_data(&data, self.files.stamp(GRANTS));
        Ok(out)
    }

    /// The grant of an access token, if it is live.
    pub fn check_access(&self, token: &str) -> io::Result<Option<Access>> {
        let d = digest(token);
        let cache = self.refresh()?;
        let t = now();
        Ok(cache
            .access
            .get(&d)
            .filter(|(_, expires)| *expires > t)
            .map(|(a, _)| a.clone()))
    }

    /// A registered client.
    pub fn client(&self, id: &str) -> io::Result<Option<Client>> {
        let cache = self.refresh()?;
        Ok(cache.clients.iter().find(|c| c.id == id).cloned())
    }

    /// Registers a client (dropping the oldest clients without a grant when the cap is
    /// reached); `Ok(false)` when every place is taken by a client with a grant.
    pub fn register(&self, client: Client) -> io::Result<bool> {
        self.update(|data, _| {
            if data.clients.len() >= MAX_CLIENTS {
                let granted: std::collections::HashSet<String> =
                    data.grants.iter().map(|g| g.client_id.clone()).collect();
                if let Some(i) = data.clients.iter().position(|c| !granted.contains(&c.id)) {
                    data.clients.remove(i);
                } else {
                    return false;
                }
            }
            data.clients.push(client);
            true
        })
    }

    /// A new grant for `client` with its first tokens.
    /// `vaults`: only those vaults of a server of several.
    pub fn grant(
        &self,
        client: &Client,
        write: bool,
        vaults: Option<Vec<String>>,
    ) -> io::Result<Option<Issued>> {
        let access = random_secret("cva_")?;
        let refresh = random_secret("cvr_")?;
        let id = format!(
            "g-{}",
            &base16ct::lower::encode_string(&digest(&refresh))[..12]
        );
        self.update(|data, t| {
            if data.grants.len() >= MAX_GRANTS {
                return None;
            }
            data.grants.push(GrantRecord {
                id: id.clone(),
                client_id: client.id.clone(),
                client_name: client.name.clone(),
                write,
                vaults: vaults.clone(),
                created: t,
                last_refresh: t,
                refresh: Some(Token {
                    digest: base16ct::lower::encode_string(&digest(&refresh)),
                    expires: t + REFRESH_TTL.as_secs(),
                }),
                used_refresh: Vec::new(),
                access: vec![Token {
                    digest: base16ct::lower::encode_string(&digest(&access)),
                    expires: t + ACCESS_TTL.as_secs(),
                }],
            });
            Some(Issued {
                access,
                refresh,
                write,
                grant: id,
            })
        })
    }

    /// Exchanges a refresh token for new tokens (the old refresh token is spent). A spent one
    /// presented again revokes its grant. `want_write`: `Some` when the client narrowed or
    /// restated the scope.
    pub fn refresh_grant(
        &self,
        client_id: &str,
        presented: &str,
        want_write: Option<bool>,
    ) -> io::Result<Result<Issued, RefreshError>> {
        let d = base16ct::lower::encode_string(&digest(presented));
        let access = random_secret("cva_")?;
        let refresh = random_secret("cvr_")?;
        self.update(|data, t| {
            if let Some(i) = data.grants.iter().position(|g| g.used_refresh.contains(&d)) {
                let g = data.grants.remove(i);
                tracing::warn!(
                    grant = %g.id,
                    client = %g.client_name,
                    "a spent refresh token came back: the grant is revoked"
                );
                return Err(RefreshError::Reused);
            }
            let Some(g) = data.grants.iter_mut().find(|g| {
                g.refresh
                    .as_ref()
                    .is_some_and(|r| r.digest == d && r.expires > t)
            }) else {
                return Err(RefreshError::Invalid);
            };
            if g.client_id != client_id {
                return Err(RefreshError::Invalid);
            }
            let write = match want_write {
                Some(true) if !g.write => return Err(RefreshError::Scope),
                Some(w) => w,
                None => g.write,
            };
            g.used_refresh.push(d.clone());
            if g.used_refresh.len() > MAX_USED_PER_GRANT {
                g.used_refresh.remove(0);
            }
            g.write = write;
            g.last_refresh = t;
            g.refresh = Some(Token {
                digest: base16ct::lower::encode_string(&digest(&refresh)),
                expires: t + REFRESH_TTL.as_secs(),
            });
            g.access.push(Token {
                digest: base16ct::lower::encode_string(&digest(&access)),
                expires: t + ACCESS_TTL.as_secs(),
            });
            if g.access.len() > MAX_ACCESS_PER_GRANT {
                g.access.remove(0);
            }
            Ok(Issued {
                access,
                refresh,
                write,
                grant: g.id.clone(),
            })
        })
    }

    /// Revokes the grant a token (access or refresh) belongs to, when that grant is
    /// `client_id`'s (RFC 7009 2.1: a client revokes only its own tokens). Unknown tokens are
    /// not an error.
    pub fn revoke_token(&self, client_id: &str, presented: &str) -> io::Result<Revoked> {
        let d = base16ct::lower::encode_string(&digest(presented));
        self.update(|data, _| {
            let Some(i) = data.grants.iter().position(|g| {
                g.refresh.as_ref().is_some_and(|r| r.digest == d)
                    || g.access.iter().any(|a| a.digest == d)
            }) else {
                return Revoked::Unknown;
            };
            if data.grants[i].client_id != client_id {
                return Revoked::OtherClient;
            }
            data.grants.remove(i);
            Revoked::Yes
        })
    }

    /// Revokes grant `id` (or its first characters, when they name one grant only); the
    /// grant's id when it was found.
    pub fn revoke(&self, id: &str) -> io::Result<Option<String>> {
        self.update(|data, _| {
            let matching: Vec<usize> = data
                .grants
                .iter()
                .enumerate()
                .filter(|(_, g)| g.id == id || (id.len() >= 4 && g.id.starts_with(id)))
                .map(|(i, _)| i)
                .collect();
            match matching.as_slice() {
                [i] => Some(data.grants.remove(*i).id),
                _ => None,
            }
        })
    }

    /// Revokes every grant and forgets every client; how many grants there were.
    pub fn revoke_all(&self) -> io::Result<usize> {
        let _lock = self.files.lock(LOCK, Duration::from_secs(5))?;
        let n = self.load().map(|d| d.grants.len()).unwrap_or(0);
        let bytes = serde_json::to_vec_pretty(&Data::default()).map_err(io::Error::other)?;
        self.files.replace(GRANTS, &bytes)?;
        let mut cache = crate::locks::lock(&self.cache);
        *cache = Cached::from_data(&Data::default(), self.files.stamp(GRANTS));
        Ok(n)
    }

    /// The live grants, oldest first.
    pub fn grants(&self) -> io::Result<Vec<GrantRecord>> {
        let mut data = self.load()?;
        prune(&mut data, now());
        Ok(data.grants)
    }
}

impl Cached {
    fn from_data(data: &Data, stamp: Option<Stamp>) -> Cached {
        let mut access = HashMap::new();
        for g in &data.grants {
            for a in &g.access {
                if let Some(d) = unhex(&a.digest) {
                    let given = Access {
                        grant: g.id.clone(),
                        write: g.write,
                        vaults: g.vaults.clone(),
                        client: g.client_id.clone(),
                    };
                    access.insert(d, (given, a.expires));
                }
            }
        }
        Cached {
            stamp,
            access,
            clients: Arc::new(data.clients.clone()),
        }
    }
}

/// Drops expired access tokens and grants whose refresh token expired.
fn prune(data: &mut Data, t: u64) {
    for g in &mut data.grants {
        g.access.retain(|a| a.expires > t);
    }
    data.grants
        .retain(|g| g.refresh.as_ref().is_some_and(|r| r.expires > t) || !g.access.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::Vault;
    use crate::vault::state::StateDir;

    #[allow(clippy::disallowed_methods)] // test fixture
    fn store() -> (tempfile::TempDir, Store) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("vault")).unwrap();
        let vault = Vault::open(&tmp.path().join("vault"), Default::default()).unwrap();
        let state = StateDir::open(&tmp.path().join("state"), &vault).unwrap();
        let s = Store::new(state.private_files("oauth").unwrap());
        (tmp, s)
    }

    fn client(id: &str) -> Client {
        Client {
            id: id.into(),
            secret: None,
            name: "Test".into(),
            redirect_uris: vec!["http://127.0.0.1:9/cb".into()],
            auth_method: "none".into(),
            created: now(),
        }
    }

    #[test]
    fn the_passphrase_is_kept_as_an_argon2id_hash_only() {
        let (_t, s) = store();
        assert!(!s.has_passphrase());
        assert!(s.set_passphrase("short").is_err());
        s.set_passphrase("correct horse battery").unwrap();
        assert!(s.verify_passphrase("correct horse battery").unwrap());
        assert!(!s.verify_passphrase("correct horse batterx").unwrap());
        let kept = String::from_utf8(s.files.read(PASSPHRASE, 4096).unwrap().unwrap()).unwrap();
        assert!(kept.starts_with("$argon2id$"), "{kept}");
        assert!(!kept.contains("horse"));
    }

    #[test]
    fn a_grant_limited_to_some_vaults_stays_limited_across_a_refresh() {
        let (_t, s) = store();
        let c = client("c1");
        s.register(c.clone()).unwrap();
        let first = s
            .grant(&c, false, Some(vec!["Work".to_owned()]))
            .unwrap()
            .unwrap();
        let limited = Some(vec!["Work".to_owned()]);
        assert_eq!(
            s.check_access(&first.access).unwrap().unwrap().vaults,
            limited
        );
        let next = s
            .refresh_grant("c1", &first.refresh, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            s.check_access(&next.access).unwrap().unwrap().vaults,
            limited
        );
        assert_eq!(s.grants().unwrap()[0].vaults, limited);
        let open = s.grant(&c, false, None).unwrap().unwrap();
        assert_eq!(s.check_access(&open.access).unwrap().unwrap().vaults, None);
    }

    #[test]
    fn refresh_rotates_and_a_spent_refresh_token_revokes_the_family() {
        let (_t, s) = store();
        let c = client("c1");
        s.register(c.clone()).unwrap();
        let first = s.grant(&c, true, None).unwrap().unwrap();
        assert_eq!(
            s.check_access(&first.access).unwrap().unwrap().grant,
            first.grant
        );
        let second = s
            .refresh_grant("c1", &first.refresh, None)
            .unwrap()
            .unwrap();
        assert!(second.write);
        // The old access token lives on until it expires; the new one works too.
        assert!(s.check_access(&second.access).unwrap().is_some());
        assert_eq!(
            s.refresh_grant("other", &second.refresh, None)
                .unwrap()
                .unwrap_err(),
            RefreshError::Invalid,
            "a refresh token is bound to its client"
        );
        assert_eq!(
            s.refresh_grant("c1", &first.refresh, None)
                .unwrap()
                .unwrap_err(),
            RefreshError::Reused
        );
        // The whole family is gone: the newest refresh token and every access token.
        assert_eq!(
            s.refresh_grant("c1", &second.refresh, None)
                .unwrap()
                .unwrap_err(),
            RefreshError::Invalid
        );
        assert!(s.check_access(&first.access).unwrap().is_none());
        assert!(s.check_access(&second.access).unwrap().is_none());
        assert!(s.grants().unwrap().is_empty());
    }

    #[test]
    fn a_client_revokes_only_its_own_grants() {
        let (_t, s) = store();
        let (a, b) = (client("ca"), client("cb"));
        s.register(a.clone()).unwrap();
        s.register(b.clone()).unwrap();
        let ga = s.grant(&a, false, None).unwrap().unwrap();
        assert_eq!(
            s.revoke_token("cb", &ga.access).unwrap(),
            Revoked::OtherClient
        );
        assert_eq!(
            s.revoke_token("cb", &ga.refresh).unwrap(),
            Revoked::OtherClient
        );
        assert!(s.check_access(&ga.access).unwrap().is_some());
        assert_eq!(
            s.revoke_token("cb", "cva_unknown").unwrap(),
            Revoked::Unknown
        );
        assert_eq!(s.revoke_token("ca", &ga.refresh).unwrap(), Revoked::Yes);
        assert!(s.check_access(&ga.access).unwrap().is_none());
    }

    #[test]
    fn a_read_grant_cannot_refresh_into_write_and_revocation_is_seen_by_another_store() {
        let (tmp, s) = store();
        let c = client("c2");
        s.register(c.clone()).unwrap();
        let g = s.grant(&c, false, None).unwrap().unwrap();
        assert_eq!(
            s.refresh_grant("c2", &g.refresh, Some(true))
                .unwrap()
                .unwrap_err(),
            RefreshError::Scope
        );
        // A second process (capvault tokens revoke) on the same folder.
        let vault = Vault::open(&tmp.path().join("vault"), Default::default()).unwrap();
        let state = StateDir::open(&tmp.path().join("state"), &vault).unwrap();
        let other = Store::new(state.private_files("oauth").unwrap());
        assert!(s.check_access(&g.access).unwrap().is_some());
        assert_eq!(other.revoke(&g.grant[..6]).unwrap(), Some(g.grant.clone()));
        assert!(s.check_access(&g.access).unwrap().is_none());
    }
}
