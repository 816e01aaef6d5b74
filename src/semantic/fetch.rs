//! `capvault model fetch` and `serve --semantic`: the three files of a model2vec model
//! downloaded from the Hugging Face hub, pinned and checked.
//!
//! - What: `{endpoint}/{repo}/resolve/{revision}/{file}` for `config.json`, `tokenizer.json`
//!   and `model.safetensors`, at a revision that is a commit (40 hex digits, never a branch),
//!   each file checked against a sha256 pin before it takes its name. The default model's pins
//!   are in this file; any other model needs the user's own (no trust on first use).
//! - How: HTTPS (HTTP only on loopback) through [`crate::net`]'s client, redirects followed only
//!   to such URLs (the hub sends large files to its CDN), each file bounded by the model's size
//!   limits and by its pinned size.
//! - Where: written through the capability layer ([`crate::vault::download`]): appended to
//!   `<file>.part`, hashed as it arrives; an interrupted download keeps its part and the next run
//!   resumes it with a `Range` request (hashing the part first, so the digest covers the whole
//!   file); a digest that differs discards the part; a right one is renamed over the file.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::model;
use crate::vault::download::{
    DownloadDir, DownloadError, DownloadFile, PRIVATE_FOLDER, SHARED_FOLDER,
};
use crate::vault::host::Host;

/// The default model: model2vec's potion-base-8M (256 dimensions, MIT licence).
pub const DEFAULT_REPO: &str = "minishlab/potion-base-8M";
/// The commit of [`DEFAULT_REPO`] its pins are for.
pub const DEFAULT_REVISION: &str = "bf8b056651a2c21b8d2565580b8569da283cab23";
/// The default model's files: name, sha256, size.
const DEFAULT_PINS: [(&str, &str, u64); 3] = [
    (
        "config.json",
        "2a6ac0e9aaa356a68a5688070db78fc3a464fefe85d2f06a1905ce3718687553",
        202,
    ),
    (
        "tokenizer.json",
        "e67e803f624fb4d67dea1c730d06e1067e1b14d830e2c2202569e3ef0f70bb50",
        683_666,
    ),
    (
        "model.safetensors",
        "f65d0f325faadc1e121c319e2faa41170d3fa07d8c89abd48ca5358d9a223de2",
        30_236_760,
    ),
];
/// The hub, unless `HF_ENDPOINT` names another (a mirror).
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// The files of a model2vec model, in download order (smallest first), with their size limits.
pub const FILES: [(&str, u64); 3] = [
    ("config.json", model::MAX_CONFIG_BYTES),
    ("tokenizer.json", model::MAX_TOKENIZER_BYTES),
    ("model.safetensors", model::MAX_WEIGHTS_BYTES),
];
/// How long one file's request may take, body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the body may stall.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Most redirects followed (the hub sends large files to its CDN: one).
const MAX_REDIRECTS: usize = 5;
/// How long to wait for another process downloading into the same folder.
const LOCK_WAIT: Duration = Duration::from_secs(900);

/// One file's pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The file's name.
    pub file: &'static str,
    /// Its sha256, lowercase hex.
    pub sha256: String,
    /// Its size, when known.
    pub size: Option<u64>,
    /// The model's limit for it.
    pub max: u64,
}

/// What to download: a repository at a commit, and a pin for each file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// `owner/name`.
    pub repo: String,
    /// A commit: 40 lowercase hex digits.
    pub revision: String,
    /// One per file of [`FILES`], in that order.
    pub pins: Vec<Pin>,
}

impl ModelSpec {
    /// The default model, pinned.
    pub fn default_model() -> ModelSpec {
        ModelSpec {
            repo: DEFAULT_REPO.to_owned(),
            revision: DEFAULT_REVISION.to_owned(),
            pins: DEFAULT_PINS
                .iter()
                .zip(FILES)
                .map(|(&(file, sha256, size), (_, max))| Pin {
                    file,
                    sha256: sha256.to_owned(),
                    size: Some(size),
                    max,
                })
                .collect(),
        }
    }

    /// The model the user asked for: the default one when nothing (or only the default repo)
    /// is given; otherwise `revision` must be a commit and `sha256` (`FILE=HEX`) must pin each
    /// of the three files.
    pub fn from_args(
        repo: Option<&str>,
        revision: Option<&str>,
        sha256: &[String],
    ) -> Result<ModelSpec, SpecError> {
        let repo = repo.unwrap_or(DEFAULT_REPO);
        check_repo(repo)?;
        if repo == DEFAULT_REPO
            && sha256.is_empty()
            && revision.is_none_or(|r| r == DEFAULT_REVISION)
        {
            return Ok(ModelSpec::default_model());
        }
        let Some(revision) = revision else {
            return Err(SpecError::NoRevision {
                repo: repo.to_owned(),
            });
        };
        check_revision(revision)?;
        let mut given: Vec<(String, String)> = Vec::new();
        for s in sha256 {
            let Some((file, hex)) = s.split_once('=') else {
                return Err(SpecError::PinForm(s.clone()));
            };
            if !FILES.iter().any(|(f, _)| *f == file) {
                return Err(SpecError::PinFile(s.clone()));
            }
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(SpecError::PinDigest(s.clone()));
            }
            if given.iter().any(|(f, _)| f == file) {
                return Err(SpecError::PinnedTwice(file.to_owned()));
            }
            given.push((file.to_owned(), hex.to_ascii_lowercase()));
        }
        let mut pins = Vec::new();
        for (file, max) in FILES {
            let Some((_, hex)) = given.iter().find(|(f, _)| f == file) else {
                return Err(SpecError::PinMissing {
                    file,
                    repo: repo.to_owned(),
                });
            };
            pins.push(Pin {
                file,
                sha256: hex.clone(),
                size: None,
                max,
            });
        }
        Ok(ModelSpec {
            repo: repo.to_owned(),
            revision: revision.to_ascii_lowercase(),
            pins,
        })
    }

    /// True for the default model with its own pins.
    pub fn is_default(&self) -> bool {
        *self == ModelSpec::default_model()
    }

    /// Its folder under `root`: `<owner>--<name>/<revision>`.
    pub fn folder_under(&self, root: &Path) -> PathBuf {
        root.join(self.repo.replace('/', "--")).join(&self.revision)
    }

    /// Its folder in the user's cache (`~/.cache/capvault/models/<owner>--<name>/<revision>`
    /// on Linux), if the user has a cache folder.
    pub fn cache_folder(&self) -> Option<PathBuf> {
        crate::vault::cache::models_root().map(|root| self.folder_under(&root))
    }

    /// The URL of `file`.
    fn url(&self, endpoint: &str, file: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{file}",
            endpoint.trim_end_matches('/'),
            self.repo,
            self.revision
        )
    }
}

/// A repository name: `owner/name`, each part of `A-Z a-z 0-9 . _ -`, neither empty, nor
/// starting with a dot or a dash, nor holding `..`.
pub fn check_repo(repo: &str) -> Result<(), SpecError> {
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && !p.starts_with(['.', '-'])
            && !p.contains("..")
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    match repo.split_once('/') {
        Some((owner, name)) if part_ok(owner) && part_ok(name) => Ok(()),
        _ => Err(SpecError::BadRepo(repo.to_owned())),
    }
}

/// A revision: a commit's 40 hex digits (a branch or tag could change under the pins).
pub fn check_revision(revision: &str) -> Result<(), SpecError> {
    if revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(SpecError::BadRevision(revision.to_owned()))
    }
}

/// The hub's address: `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
pub fn endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
}

/// What a fetch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    /// Files downloaded now (name, bytes received in this run).
    pub downloaded: Vec<(&'static str, u64)>,
    /// Files that were there already with the right digest.
    pub present: Vec<&'static str>,
}

/// Progress, for the user: one line at a time.
pub type Report<'a> = &'a (dyn Fn(&str) + Sync);

/// Downloads what `spec` pins into `folder` (created when missing: `0700` when `private`, as
/// under the user's cache folder, `0755` otherwise) from `endpoint`. Files already there with
/// the right digest are kept. Does not load the model.
pub async fn fetch(
    host: &Host,
    spec: &ModelSpec,
    folder: &Path,
    private: bool,
    endpoint: &str,
    report: Report<'_>,
) -> Result<Fetched, FetchError> {
    // The URLs first: a refused endpoint fails before anything is created.
    let mut urls = Vec::new();
    for pin in &spec.pins {
        let url = spec.url(endpoint, pin.file);
        crate::net::check_fetch_url(&url).map_err(|e| FetchError::Endpoint(e.into()))?;
        urls.push(url);
    }
    let dir = host.download_dir(
        folder,
        if private {
            PRIVATE_FOLDER
        } else {
            SHARED_FOLDER
        },
    )?;
    let _lock = dir.lock(LOCK_WAIT)?;
    let mut client = None;
    let mut done = Fetched::default();
    for (pin, url) in spec.pins.iter().zip(&urls) {
        if has_file(&dir, pin)? {
            done.present.push(pin.file);
            continue;
        }
        let client = match &client {
            Some(c) => c,
            None => client.insert(http_client().map_err(FetchError::Client)?),
        };
        match download(client, url, &dir, pin, report).await {
            Ok(got) => done.downloaded.push((pin.file, got)),
            Err(e) => {
                // A request that failed before the first byte leaves nothing behind.
                let _ = dir.remove_empty_part(pin.file);
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// [`fetch`] on a runtime of its own (for code that runs before any runtime exists).
pub fn fetch_blocking(
    host: &Host,
    spec: &ModelSpec,
    folder: &Path,
    private: bool,
    endpoint: &str,
    report: Report<'_>,
) -> Result<Fetched, FetchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(FetchError::Runtime)?;
    runtime.block_on(fetch(host, spec, folder, private, endpoint, report))
}

/// The client: [`crate::net`]'s, following redirects only to https (or loopback http).
fn http_client() -> Result<reqwest::Client, Box<dyn std::error::Error + Send + Sync>> {
    Ok(
        crate::net::client_builder(&[], REQUEST_TIMEOUT, CONNECT_TIMEOUT)?
            .read_timeout(READ_TIMEOUT)
            .redirect(crate::net::safe_redirects(MAX_REDIRECTS))
            .user_agent(concat!("capvault/", env!("CARGO_PKG_VERSION")))
            .build()?,
    )
}

/// The most bytes `pin`'s file may have.
fn bound(pin: &Pin) -> u64 {
    pin.size.map_or(pin.max, |s| s.min(pin.max))
}

/// True when the finished file is there with the pinned digest.
fn has_file(dir: &DownloadDir, pin: &Pin) -> Result<bool, FetchError> {
    let Some(mut file) = dir.open_file(pin.file)? else {
        return Ok(false);
    };
    let len = file.len().map_err(io_err(file.shown().to_owned()))?;
    if len > bound(pin) || pin.size.is_some_and(|s| s != len) {
        return Ok(false);
    }
    let mut hasher = Sha256::new();
    hash_into(&mut file, &mut hasher, bound(pin))?;
    Ok(base16ct::lower::encode_string(&hasher.finalize()) == pin.sha256)
}

/// Feeds `file` from where it is to its end (at most `max` bytes) to `hasher`; returns the
/// bytes read.
fn hash_into(file: &mut DownloadFile, hasher: &mut Sha256, max: u64) -> Result<u64, FetchError> {
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(io_err(file.shown().to_owned()))?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
        if total > max {
            return Err(FetchError::TooLarge {
                path: file.shown().to_owned(),
                max,
            });
        }
        hasher.update(&buf[..n]);
    }
}

/// `Content-Range: bytes START-END/TOTAL`: (START, TOTAL when given).
fn content_range(response: &reqwest::Response) -> Option<(u64, Option<u64>)> {
    let v = response
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    let (range, total) = v.strip_prefix("bytes ")?.split_once('/')?;
    let (start, _end) = range.split_once('-')?;
    let total = if total == "*" {
        None
    } else {
        Some(total.parse().ok()?)
    };
    Some((start.parse().ok()?, total))
}

/// Downloads one file into its part (resuming it), checks the digest, renames it. Returns
/// the bytes received in this run.
async fn download(
    client: &reqwest::Client,
    url: &str,
    dir: &DownloadDir,
    pin: &Pin,
    report: Report<'_>,
) -> Result<u64, FetchError> {
    let name = pin.file;
    let bound = bound(pin);
    let io_err = &io_err(name.to_owned());
    let mut part = dir.open_part(name)?;
    let mut hasher = Sha256::new();
    let mut have = part.len().map_err(io_err)?;
    if have > bound {
        part.truncate().map_err(io_err)?;
        have = 0;
    }
    if have > 0 {
        // The digest must cover the whole file: what an earlier run wrote first.
        have = hash_into(&mut part, &mut hasher, bound)?;
    }
    let mut received = 0u64;
    let mut restarted = false;
    let complete_already = have > 0 && pin.size == Some(have);
    loop {
        if complete_already {
            break;
        }
        let mut request = client.get(url);
        if have > 0 {
            request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
            report(&format!("{name}: resuming after {have} bytes"));
        }
        let mut response = request.send().await.map_err(|e| FetchError::Request {
            name,
            url: url.to_owned(),
            why: error_chain(&e.without_url()),
        })?;
        let status = response.status().as_u16();
        let total = match status {
            206 if have > 0 => match content_range(&response) {
                Some((start, total)) if start == have => {
                    total.or_else(|| response.content_length().map(|l| have + l))
                }
                _ if !restarted => {
                    // A range the part does not end at: start over.
                    part.truncate().map_err(io_err)?;
                    (have, hasher, restarted) = (0, Sha256::new(), true);
                    continue;
                }
                _ => {
                    return Err(FetchError::BadRange {
                        name,
                        url: url.to_owned(),
                    });
                }
            },
            200 => {
                if have > 0 {
                    report(&format!(
                        "{name}: the server sent the whole file; starting over"
                    ));
                    part.truncate().map_err(io_err)?;
                    (have, hasher) = (0, Sha256::new());
                }
                response.content_length()
            }
            416 if have > 0
                && base16ct::lower::encode_string(&hasher.clone().finalize()) == pin.sha256 =>
            {
                break; // the part was whole already (its size was not pinned)
            }
            416 if have > 0 && !restarted => {
                part.truncate().map_err(io_err)?;
                (have, hasher, restarted) = (0, Sha256::new(), true);
                continue;
            }
            404 => {
                return Err(FetchError::NotFound {
                    name,
                    url: url.to_owned(),
                });
            }
            _ => {
                return Err(FetchError::Status {
                    name,
                    url: url.to_owned(),
                    status,
                });
            }
        };
        if let Some(t) = total
            && t > bound
        {
            return Err(FetchError::Offers {
                name,
                offered: t,
                bound,
            });
        }
        if have == 0 {
            report(&format!(
                "{name}: downloading{}",
                total.map(|t| format!(" {t} bytes")).unwrap_or_default()
            ));
        }
        let shown_total = total.or(pin.size);
        let interrupted = |have: u64, why: String| FetchError::Interrupted {
            name,
            have,
            total: shown_total,
            why,
        };
        let mut next_report = have + (64 << 20);
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    part.sync().map_err(io_err)?;
                    return Err(interrupted(have, error_chain(&e.without_url())));
                }
            };
            if have + chunk.len() as u64 > bound {
                drop(part);
                dir.remove_part(name)?;
                return Err(FetchError::SentTooMuch { name, bound });
            }
            part.write_all(&chunk).map_err(io_err)?;
            hasher.update(&chunk);
            have += chunk.len() as u64;
            received += chunk.len() as u64;
            if have >= next_report {
                report(&format!(
                    "{name}: {have}{} bytes",
                    shown_total.map(|t| format!(" of {t}")).unwrap_or_default()
                ));
                next_report = have + (64 << 20);
            }
        }
        part.sync().map_err(io_err)?;
        if let Some(t) = shown_total
            && have < t
        {
            return Err(interrupted(have, "the connection closed early".to_owned()));
        }
        break;
    }
    let actual = base16ct::lower::encode_string(&hasher.finalize());
    if actual != pin.sha256 {
        drop(part);
        dir.remove_part(name)?;
        return Err(FetchError::Mismatch {
            name,
            expected: pin.sha256.clone(),
            actual,
        });
    }
    dir.commit_part(name, part)?;
    report(&format!("{name}: sha256 verified"));
    Ok(received)
}

/// Why the model's description on the command line is refused.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// Not `owner/name`.
    #[error("--repo `{0}`: give OWNER/NAME (letters, digits, `.`, `_`, `-`)")]
    BadRepo(String),
    /// Not a commit.
    #[error("--revision `{0}`: give a commit (40 hex digits), not a branch or tag")]
    BadRevision(String),
    /// Another repository than the default needs a commit.
    #[error(
        "--revision is required for {repo}: the commit to download (40 hex digits), so every \
         run gets the same files"
    )]
    NoRevision { repo: String },
    /// A `--sha256` that is not `FILE=HEX`.
    #[error("--sha256 `{0}`: give FILE=HEX")]
    PinForm(String),
    /// A `--sha256` for another file than the model's three.
    #[error("--sha256 `{0}`: the file must be config.json, tokenizer.json or model.safetensors")]
    PinFile(String),
    /// A digest that is not 64 hex digits.
    #[error("--sha256 `{0}`: the digest must be 64 hex digits")]
    PinDigest(String),
    /// One file pinned twice.
    #[error("--sha256: {0} is pinned twice")]
    PinnedTwice(String),
    /// One of the three files is not pinned.
    #[error(
        "--sha256 {file}=HEX is required for {repo}: each of config.json, tokenizer.json and \
         model.safetensors must be pinned (their digests are on the hub's file pages)"
    )]
    PinMissing { file: &'static str, repo: String },
}

/// Why a download failed: which file (or folder), what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// `HF_ENDPOINT` is not a URL capvault fetches from.
    #[error("HF_ENDPOINT: {0}")]
    Endpoint(Box<dyn std::error::Error + Send + Sync>),
    /// The folder or one of its files.
    #[error(transparent)]
    Folder(#[from] DownloadError),
    /// The HTTP client could not be made.
    #[error("HTTP client: {0}")]
    Client(Box<dyn std::error::Error + Send + Sync>),
    /// `fetch_blocking`'s runtime did not start.
    #[error("cannot start a runtime: {0}")]
    Runtime(std::io::Error),
    /// Reading or writing a file of the folder failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A file there is larger than its pin allows.
    #[error("{path}: larger than {max} bytes")]
    TooLarge { path: String, max: u64 },
    /// The request failed (`why`: the error and its causes).
    #[error("{name}: {url}: {why}")]
    Request {
        name: &'static str,
        url: String,
        why: String,
    },
    /// A partial answer for another range.
    #[error("{name}: {url}: a Content-Range that does not fit")]
    BadRange { name: &'static str, url: String },
    /// HTTP 404.
    #[error("{name}: {url}: not found (HTTP 404): check the repository and revision")]
    NotFound { name: &'static str, url: String },
    /// Another HTTP status.
    #[error("{name}: {url}: HTTP {status}")]
    Status {
        name: &'static str,
        url: String,
        status: u16,
    },
    /// The server announces more bytes than the pin allows.
    #[error("{name}: the server offers {offered} bytes; at most {bound} expected")]
    Offers {
        name: &'static str,
        offered: u64,
        bound: u64,
    },
    /// The transfer stopped; the part is kept for the next run.
    #[error(
        "{name}: the download was interrupted after {have}{} bytes ({why}); run the command \
         again to resume",
        total.map(|t| format!(" of {t}")).unwrap_or_default()
    )]
    Interrupted {
        name: &'static str,
        have: u64,
        total: Option<u64>,
        why: String,
    },
    /// The server sent more than the pin allows; the part was removed.
    #[error("{name}: the server sent more than {bound} bytes; the download was discarded")]
    SentTooMuch { name: &'static str, bound: u64 },
    /// The digest is not the pinned one; the part was removed.
    #[error(
        "{name}: sha256 mismatch: expected {expected}, got {actual}; the download was discarded"
    )]
    Mismatch {
        name: &'static str,
        expected: String,
        actual: String,
    },
}

fn io_err(path: String) -> impl Fn(std::io::Error) -> FetchError {
    move |source| FetchError::Io {
        path: path.clone(),
        source,
    }
}

/// An error with its causes ("error sending request: connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_model_is_pinned_to_a_commit() {
        let spec = ModelSpec::from_args(None, None, &[]).unwrap();
        assert!(spec.is_default());
        assert!(check_revision(&spec.revision).is_ok());
        assert_eq!(spec.pins.len(), 3);
        assert!(
            spec.pins
                .iter()
                .all(|p| p.sha256.len() == 64 && p.size.is_some())
        );
        assert_eq!(
            ModelSpec::from_args(Some(DEFAULT_REPO), Some(DEFAULT_REVISION), &[]).unwrap(),
            spec
        );
        assert_eq!(
            spec.url("https://huggingface.co/", "config.json"),
            "https://huggingface.co/minishlab/potion-base-8M/resolve/\
             bf8b056651a2c21b8d2565580b8569da283cab23/config.json"
        );
        assert_eq!(
            spec.folder_under(Path::new("/c")),
            Path::new("/c/minishlab--potion-base-8M/bf8b056651a2c21b8d2565580b8569da283cab23")
        );
    }

    #[test]
    fn another_model_needs_a_commit_and_three_pins() {
        let h = "a".repeat(64);
        let all = [
            format!("config.json={h}"),
            format!("tokenizer.json={h}"),
            format!("model.safetensors={}", "B".repeat(64)),
        ];
        let rev = "0123456789abcdef0123456789abcdef01234567";
        let spec = ModelSpec::from_args(Some("o/n"), Some(rev), &all).unwrap();
        assert_eq!(spec.pins[2].sha256, "b".repeat(64));
        assert!(!spec.is_default());
        let err = |repo, revision, sha: &[String]| {
            ModelSpec::from_args(repo, revision, sha)
                .unwrap_err()
                .to_string()
        };
        assert!(err(Some("o/n"), None, &all).contains("--revision"));
        assert!(err(Some("o/n"), Some("main"), &all).contains("commit"));
        assert!(err(Some("o/n"), Some(rev), &all[..2]).contains("model.safetensors"));
        // Another revision of the default repository is another model too.
        assert!(err(None, Some(rev), &[]).contains("--sha256"));
        let twice = [
            all[0].clone(),
            all[0].clone(),
            all[1].clone(),
            all[2].clone(),
        ];
        assert!(err(Some("o/n"), Some(rev), &twice).contains("twice"));
        assert!(err(Some("o/n"), Some(rev), &[format!("x.bin={h}")]).contains("must be"));
        assert!(err(Some("o/n"), Some(rev), &["config.json=zz".to_owned()]).contains("64 hex"));
    }

    #[test]
    fn repository_names_are_owner_slash_name() {
        for ok in ["minishlab/potion-base-8M", "a/b", "A_b/c.d-e"] {
            assert!(check_repo(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "a", "a/", "/b", "a/b/c", "../b", "a/..", "a/b..c", ".a/b", "a/.b", "-a/b",
            "a b/c", "a/b?x", "a/b#c", "a%2f/b", "a\\b/c",
        ] {
            assert!(check_repo(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn content_range_is_read_strictly() {
        let response = |v: &str| {
            reqwest::Response::from(
                http::Response::builder()
                    .status(206)
                    .header("content-range", v)
                    .body("")
                    .unwrap(),
            )
        };
        assert_eq!(
            content_range(&response("bytes 10-19/20")),
            Some((10, Some(20)))
        );
        assert_eq!(content_range(&response("bytes 10-19/*")), Some((10, None)));
        assert_eq!(content_range(&response("items 10-19/20")), None);
        assert_eq!(content_range(&response("bytes x-19/20")), None);
    }
}
