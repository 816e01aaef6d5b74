//! `capvault model fetch` and `serve --semantic` through the real binary, against a loopback
//! server the test runs that plays the Hugging Face hub: it serves a tiny model2vec model at
//! `/{repo}/resolve/{revision}/{file}` (the weights through a redirect to a "CDN" path, as the
//! hub does for large files), honours `Range`, records every request, and can be told to cut a
//! body short, serve wrong bytes or ignore `Range`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::sha256_hex;

const REPO: &str = "test/tiny";
const REV: &str = "0123456789abcdef0123456789abcdef01234567";
const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The tiny model's three files.
fn model_files() -> HashMap<&'static str, Vec<u8>> {
    let words = ["dog", "puppy", "bread", "oven", "garden", "rose"];
    let dims = 4;
    let mut vocab = serde_json::Map::new();
    vocab.insert("[unk]".into(), json!(0));
    let mut table = vec![0f32; dims];
    table[dims - 1] = 1e-3;
    for (i, w) in words.iter().enumerate() {
        vocab.insert((*w).to_owned(), json!(i + 1));
        let mut row = vec![0f32; dims];
        row[i / 2] = 1.0;
        table.extend(row);
    }
    // Enough rows that the weights file can be cut in the middle meaningfully.
    for _ in 0..200 {
        table.extend(vec![0.5f32; dims]);
    }
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[unk]"}
    });
    HashMap::from([
        (
            "config.json",
            json!({"model_type": "model2vec", "hidden_dim": dims})
                .to_string()
                .into_bytes(),
        ),
        ("tokenizer.json", tokenizer.to_string().into_bytes()),
        (
            "model.safetensors",
            capvault::semantic::model::safetensors_bytes(&table, dims).unwrap(),
        ),
    ])
}

/// `--sha256 FILE=HEX` for each file.
fn pins(files: &HashMap<&'static str, Vec<u8>>) -> Vec<String> {
    FILES
        .iter()
        .map(|f| format!("{f}={}", sha256_hex(&files[f])))
        .collect()
}

/// One request the hub saw.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    range: Option<String>,
}

#[derive(Default)]
struct HubState {
    files: HashMap<&'static str, Vec<u8>>,
    seen: Vec<Seen>,
    /// File → send only this many bytes of its next body, then close the connection.
    cut: HashMap<&'static str, usize>,
    /// Files served with one byte changed.
    wrong: HashSet<&'static str>,
    /// Answer 200 with the whole file to a `Range` request.
    ignore_range: bool,
}

/// The loopback hub.
struct Hub {
    addr: SocketAddr,
    state: Arc<Mutex<HubState>>,
}

impl Hub {
    async fn start(files: HashMap<&'static str, Vec<u8>>) -> Hub {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(HubState {
            files,
            ..Default::default()
        }));
        let shared = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                let state = Arc::clone(&shared);
                tokio::spawn(async move {
                    let _ = serve_one(conn, state).await;
                });
            }
        });
        Hub { addr, state }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn set(&self, f: impl FnOnce(&mut HubState)) {
        f(&mut self.state.lock().unwrap());
    }
}

/// Answers one request, then closes the connection.
async fn serve_one(
    mut conn: tokio::net::TcpStream,
    state: Arc<Mutex<HubState>>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).await?;
        if n == 0 || head.len() > 16 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_owned();
    let range = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("range"))
        .map(|(_, v)| v.trim().to_owned());
    let resolve = format!("/{REPO}/resolve/{REV}/");
    let (status, headers, body, cut) = {
        let mut st = state.lock().unwrap();
        st.seen.push(Seen {
            path: path.clone(),
            range: range.clone(),
        });
        let file = path
            .strip_prefix(&resolve)
            .or_else(|| path.strip_prefix(&format!("/cdn/{REV}/")))
            .and_then(|f| FILES.iter().find(|k| **k == f).copied());
        match file {
            // The hub redirects large files to its CDN.
            Some("model.safetensors") if path.starts_with(&resolve) => (
                "302 Found",
                vec![
                    (
                        "Location".to_owned(),
                        format!("/cdn/{REV}/model.safetensors"),
                    ),
                    ("X-Repo-Commit".to_owned(), REV.to_owned()),
                ],
                Vec::new(),
                None,
            ),
            Some(f) => {
                let mut bytes = st.files[f].clone();
                if st.wrong.contains(f) {
                    let mid = bytes.len() / 2;
                    bytes[mid] ^= 0xff;
                }
                let len = bytes.len();
                let mut headers = vec![
                    ("ETag".to_owned(), format!("\"{}\"", sha256_hex(&bytes))),
                    ("X-Repo-Commit".to_owned(), REV.to_owned()),
                ];
                let start = range
                    .as_deref()
                    .and_then(|r| r.strip_prefix("bytes="))
                    .and_then(|r| r.strip_suffix('-'))
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|_| !st.ignore_range);
                let cut = st.cut.remove(f);
                match start {
                    Some(n) if n < len => {
                        headers.push((
                            "Content-Range".to_owned(),
                            format!("bytes {n}-{}/{len}", len - 1),
                        ));
                        ("206 Partial Content", headers, bytes[n..].to_vec(), cut)
                    }
                    Some(_) => (
                        "416 Range Not Satisfiable",
                        vec![("Content-Range".to_owned(), format!("bytes */{len}"))],
                        Vec::new(),
                        None,
                    ),
                    None => ("200 OK", headers, bytes, cut),
                }
            }
            None => ("404 Not Found", Vec::new(), b"not found".to_vec(), None),
        }
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    conn.write_all(out.as_bytes()).await?;
    let sent = cut.unwrap_or(body.len()).min(body.len());
    conn.write_all(&body[..sent]).await?;
    conn.flush().await?;
    if cut.is_some() {
        // Let the client read what was sent before the connection goes.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    conn.shutdown().await?;
    Ok(())
}

/// Runs `capvault <args>` with the hub at `endpoint`; returns (success, stdout, stderr).
async fn with_hub(args: &[&str], endpoint: &str, home: &Path) -> (bool, String, String) {
    let out = tokio::process::Command::from(crate::common::capvault())
        .args(args)
        .env("HF_ENDPOINT", endpoint)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `capvault model fetch --repo test/tiny --revision REV --sha256 ... --out <out>`.
async fn fetch(hub: &Hub, pins: &[String], out: &Path, home: &Path) -> (bool, String, String) {
    let mut args = vec![
        "model",
        "fetch",
        "--repo",
        REPO,
        "--revision",
        REV,
        "--out",
        out.to_str().unwrap(),
    ];
    for p in pins {
        args.extend(["--sha256", p]);
    }
    with_hub(&args, &hub.endpoint(), home).await
}

#[tokio::test]
async fn fetch_downloads_the_pinned_files_and_the_folder_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let files = model_files();
    let hub = Hub::start(files.clone()).await;
    let out = tmp.path().join("models/tiny");
    let (ok, stdout, stderr) = fetch(&hub, &pins(&files), &out, tmp.path()).await;
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(&format!("--embedding-model {}", out.display())),
        "{stdout}"
    );
    for f in FILES {
        assert_eq!(std::fs::read(out.join(f)).unwrap(), files[f], "{f}");
        assert!(!out.join(format!("{f}.part")).exists());
    }
    let seen = hub.seen();
    // Three files, the weights through one redirect; every hub path names the commit.
    assert_eq!(seen.len(), 4, "{seen:?}");
    for s in &seen {
        assert!(
            s.path.starts_with(&format!("/{REPO}/resolve/{REV}/"))
                || s.path == format!("/cdn/{REV}/model.safetensors"),
            "{s:?}"
        );
        assert!(!s.path.contains("/main/"), "{s:?}");
        assert!(s.range.is_none(), "{s:?}");
    }

    let (ok, stdout, stderr) = with_hub(
        &["model", "check", out.to_str().unwrap(), "--text", "puppy"],
        &hub.endpoint(),
        tmp.path(),
    )
    .await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("207 tokens x 4 dimensions"), "{stdout}");
    assert!(stdout.contains("1 non-zero dimensions"), "{stdout}");

    // A second run finds every file with its digest and asks the hub nothing.
    let (ok, stdout, stderr) = fetch(&hub, &pins(&files), &out, tmp.path()).await;
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("nothing downloaded now, 3 there already"),
        "{stdout}"
    );
    assert_eq!(hub.seen().len(), 4);
}

#[tokio::test]
async fn a_sha256_mismatch_is_refused_and_leaves_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let files = model_files();
    let hub = Hub::start(files.clone()).await;
    hub.set(|s| {
        s.wrong.insert("tokenizer.json");
    });
    let out = tmp.path().join("m");
    let (ok, _, stderr) = fetch(&hub, &pins(&files), &out, tmp.path()).await;
    assert!(!ok);
    let expected = sha256_hex(&files["tokenizer.json"]);
    let mut bad = files["tokenizer.json"].clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    assert!(
        stderr.contains("tokenizer.json: sha256 mismatch"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("expected {expected}")), "{stderr}");
    assert!(
        stderr.contains(&format!("got {}", sha256_hex(&bad))),
        "{stderr}"
    );
    assert!(!out.join("tokenizer.json").exists());
    assert!(!out.join("tokenizer.json.part").exists());
    // The file before it was right and stays; the weights were never asked for.
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    assert!(out.join("config.json").exists());
    assert!(!hub.seen().iter().any(|s| s.path.contains("safetensors")));
}

#[tokio::test]
async fn an_interrupted_download_keeps_its_part_and_the_next_run_resumes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let files = model_files();
    let hub = Hub::start(files.clone()).await;
    let total = files["model.safetensors"].len();
    hub.set(|s| {
        s.cut.insert("model.safetensors", 1000);
    });
    let out = tmp.path().join("m");
    let (ok, _, stderr) = fetch(&hub, &pins(&files), &out, tmp.path()).await;
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "model.safetensors: the download was interrupted after 1000 of {total} bytes"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("run the command again to resume"),
        "{stderr}"
    );
    let part = out.join("model.safetensors.part");
    let kept = std::fs::read(&part).unwrap();
    assert_eq!(kept, files["model.safetensors"][..1000]);
    assert!(!out.join("model.safetensors").exists());

    let before = hub.seen().len();
    let (ok, _, stderr) = fetch(&hub, &pins(&files), &out, tmp.path()).await;
    assert!(ok, "{stderr}");
    let again = &hub.seen()[before..];
    // The other files were there; only the weights were asked for, from where the part ends
    // (the range carried through the hub's redirect).
    assert_eq!(again.len(), 2, "{again:?}");
    for s in again {
        assert_eq!(s.range.as_deref(), Some("bytes=1000-"), "{s:?}");
    }
    assert_eq!(
        std::fs::read(out.join("model.safetensors")).unwrap(),
        files["model.safetensors"]
    );
    assert!(!part.exists());
}

#[tokio::test]
async fn a_server_that_ignores_range_makes_the_download_start_over() {
    let tmp = tempfile::tempdir().unwrap();
    let files = model_files();
    let hub = Hub::start(files.clone()).await;
    hub.set(|s| {
        s.cut.insert("tokenizer.json", 100);
    });
    let out = tmp.path().join("m");
    let (ok, _, _) = fetch(&hub, &pins(&files), &out, tmp.path()).await;
    assert!(!ok);
    assert_eq!(
        std::fs::metadata(out.join("tokenizer.json.part"))
            .unwrap()
            .len(),
        100
    );
    hub.set(|s| s.ignore_range = true);
    let (ok, _, stderr) = fetch(&hub, &pins(&files), &out, tmp.path()).await;
    assert!(ok, "{stderr}");
    assert!(stderr.contains("starting over"), "{stderr}");
    assert_eq!(
        std::fs::read(out.join("tokenizer.json")).unwrap(),
        files["tokenizer.json"]
    );
}

#[tokio::test]
async fn a_custom_repo_needs_a_commit_and_three_pins_before_any_request() {
    let tmp = tempfile::tempdir().unwrap();
    let files = model_files();
    let hub = Hub::start(files.clone()).await;
    let out = tmp.path().join("m");
    let out = out.to_str().unwrap();
    let all = pins(&files);
    let run = |args: Vec<&'static str>, extra: Vec<String>| {
        let hub = hub.endpoint();
        let home = tmp.path().to_owned();
        let mut args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        args.extend(["--out".to_owned(), out.to_owned()]);
        for p in extra {
            args.extend(["--sha256".to_owned(), p]);
        }
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            with_hub(&args, &hub, &home).await
        }
    };
    let (ok, _, stderr) = run(vec!["model", "fetch", "--repo", REPO], all.clone()).await;
    assert!(!ok);
    assert!(stderr.contains("--revision is required"), "{stderr}");
    let (ok, _, stderr) = run(
        vec!["model", "fetch", "--repo", REPO, "--revision", "main"],
        all.clone(),
    )
    .await;
    assert!(!ok);
    assert!(stderr.contains("not a branch"), "{stderr}");
    let (ok, _, stderr) = run(
        vec!["model", "fetch", "--repo", REPO, "--revision", REV],
        all[..2].to_vec(),
    )
    .await;
    assert!(!ok);
    assert!(
        stderr.contains("--sha256 model.safetensors=HEX is required"),
        "{stderr}"
    );
    let (ok, _, stderr) = run(
        vec!["model", "fetch", "--repo", "test/../x", "--revision", REV],
        all.clone(),
    )
    .await;
    assert!(!ok);
    assert!(stderr.contains("OWNER/NAME"), "{stderr}");
    assert!(hub.seen().is_empty(), "{:?}", hub.seen());
    assert!(!Path::new(out).exists());
}

#[tokio::test]
async fn a_plain_http_endpoint_off_loopback_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let files = model_files();
    let out = tmp.path().join("m");
    let mut args = vec![
        "model",
        "fetch",
        "--repo",
        REPO,
        "--revision",
        REV,
        "--out",
        out.to_str().unwrap(),
    ];
    let all = pins(&files);
    for p in &all {
        args.extend(["--sha256", p]);
    }
    let (ok, _, stderr) = with_hub(&args, "http://192.0.2.1:9", tmp.path()).await;
    assert!(!ok);
    assert!(stderr.contains("must be https"), "{stderr}");
    assert!(!out.exists());
}

/// `serve <vault> --semantic` with the testing aid's model, against `endpoint`.
async fn serve_semantic(vault: &Path, endpoint: &str, home: &Path) -> crate::common::Server {
    serve_with(vault, endpoint, home, &["--semantic"]).await
}

/// `serve <vault> <extra>` with the testing aid's model, against `endpoint`.
async fn serve_with(
    vault: &Path,
    endpoint: &str,
    home: &Path,
    extra: &[&str],
) -> crate::common::Server {
    let files = model_files();
    let mut cmd = crate::common::serve_command(vault, extra);
    cmd.args(["--semantic-repo", REPO, "--semantic-revision", REV]);
    for p in pins(&files) {
        cmd.args(["--semantic-sha256", &p]);
    }
    cmd.env("HF_ENDPOINT", endpoint)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"));
    crate::common::Server::from_command(cmd).await
}

#[tokio::test]
async fn serve_semantic_downloads_the_model_into_the_cache_then_uses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    crate::common::write_tree(&vault, &[("Dogs.md", "A puppy in the garden.\n")]);
    let hub = Hub::start(model_files()).await;
    let s = serve_semantic(&vault, &hub.endpoint(), tmp.path()).await;
    let info = s
        .eventually(30, "vault_info", json!({}), |i| {
            i["embedding"]["state"] == "ready"
        })
        .await;
    // Named after the cache folder it was downloaded into: repository and commit.
    assert_eq!(info["embedding"]["model"], REPO, "{info}");
    assert_eq!(info["embedding"]["revision"], REV, "{info}");
    assert_eq!(info["embedding"]["dimensions"], 4, "{info}");
    let r = s
        .ok("search_notes", json!({"query": "dog", "mode": "semantic"}))
        .await;
    assert_eq!(r["hits"][0]["path"], "Dogs.md", "{r}");
    s.stop().await;
    let folder = tmp
        .path()
        .join("cache/capvault/models/test--tiny")
        .join(REV);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    for f in FILES {
        assert!(folder.join(f).is_file(), "{f}");
    }
    assert_eq!(hub.seen().len(), 4);

    // The next start finds the model in the cache and asks the hub nothing.
    let s = serve_semantic(&vault, &hub.endpoint(), tmp.path()).await;
    s.eventually(30, "vault_info", json!({}), |i| {
        i["embedding"]["state"] == "ready"
    })
    .await;
    s.stop().await;
    assert_eq!(hub.seen().len(), 4);
}

#[tokio::test]
async fn serve_semantic_without_a_hub_still_serves_keyword_search() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    crate::common::write_tree(&vault, &[("Dogs.md", "A puppy in the garden.\n")]);
    // Nothing listens on port 1 of loopback: the connection is refused at once.
    let s = serve_semantic(&vault, "http://127.0.0.1:1", tmp.path()).await;
    s.wait_index_ready().await;
    let info = s.ok("vault_info", json!({})).await;
    // No model, and vault_info says why (contract.rs checks the wording).
    assert_eq!(info["embedding"]["state"], "unavailable", "{info}");
    // Nothing was received, so nothing is left but the (empty) folder.
    let folder = tmp
        .path()
        .join("cache/capvault/models/test--tiny")
        .join(REV);
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
    let r = s.ok("search_notes", json!({"query": "puppy"})).await;
    assert_eq!(r["mode"], "ranked");
    assert_eq!(r["hits"][0]["path"], "Dogs.md", "{r}");
    let r = s
        .call(
            "search_notes",
            json!({"query": "puppy", "mode": "semantic"}),
        )
        .await;
    assert!(r.is_error);
    assert!(r.text.contains("--semantic"), "{}", r.text);
    assert!(r.text.contains("capvault model fetch"), "{}", r.text);
    s.stop().await;
}

#[tokio::test]
async fn the_config_files_semantic_turns_it_on_and_a_folder_wins_over_it() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    crate::common::write_tree(&vault, &[("Dogs.md", "A puppy in the garden.\n")]);
    crate::common::write_tree(
        &tmp.path().join("config/capvault"),
        &[("config.toml", "semantic = true\n")],
    );
    let hub = Hub::start(model_files()).await;
    let s = serve_with(&vault, &hub.endpoint(), tmp.path(), &[]).await;
    let info = s
        .eventually(30, "vault_info", json!({}), |i| {
            i["embedding"]["state"] == "ready"
        })
        .await;
    assert_eq!(info["embedding"]["model"], REPO, "{info}");
    s.stop().await;

    // --embedding-model wins over the file's `semantic`: the hub is not asked.
    let local = tmp.path().join("local");
    std::fs::create_dir(&local).unwrap();
    for (name, bytes) in model_files() {
        std::fs::write(local.join(name), bytes).unwrap();
    }
    let before = hub.seen().len();
    let s = serve_with(
        &vault,
        &hub.endpoint(),
        tmp.path(),
        &["--embedding-model", local.to_str().unwrap()],
    )
    .await;
    let info = s
        .eventually(30, "vault_info", json!({}), |i| {
            i["embedding"]["state"] == "ready"
        })
        .await;
    assert_eq!(info["embedding"]["model"], "local", "{info}");
    s.stop().await;
    assert_eq!(hub.seen().len(), before);

    // Both flags at once is a usage error.
    let (ok, _, stderr) = with_hub(
        &[
            "serve",
            vault.to_str().unwrap(),
            "--semantic",
            "--embedding-model",
            local.to_str().unwrap(),
        ],
        &hub.endpoint(),
        tmp.path(),
    )
    .await;
    assert!(!ok);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
