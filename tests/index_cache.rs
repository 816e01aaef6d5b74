//! The search index's cache folder, driven through the real binary: a restart reuses the saved
//! index and catches up with what changed while the server was stopped; a damaged or outdated
//! cache is set aside and rebuilt; the cache is refused inside the vault (also through a
//! symlink); one process per cache folder; a cache folder that refuses writes costs no results.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Server, write_tree};
use serde_json::{Value, json};

/// Starts a server on `vault` with `--index-cache cache` and waits for its index; returns the
/// server and `vault_info.index`.
async fn start_with_cache(vault: &Path, cache: &Path) -> (Server, Value) {
    let server = Server::start_with(vault, &["--index-cache", cache.to_str().unwrap()]).await;
    let index = server.wait_index_ready().await;
    (server, index)
}

/// The index files of the one vault cached under `cache` (manifest and lock excepted).
fn segment_files(cache: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(vault_cache_folder(cache))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !matches!(
                p.file_name().unwrap().to_str(),
                Some("manifest.json" | "lock" | "vault-birth")
            )
        })
        .collect()
}

/// Starts a server on `vault` with the index cache in `cache`, retrying while the previous
/// process (killed by the last `stop`) still holds the folder's lock.
async fn start_cached(vault: &Path, cache: &Path) -> (Server, Value) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let (server, index) = start_with_cache(vault, cache).await;
        let busy = index["cache"]
            .as_str()
            .is_some_and(|c| c.contains("another capvault process"));
        if !busy {
            return (server, index);
        }
        assert!(Instant::now() < until, "cache still locked: {index}");
        server.stop().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the server has saved its index to the cache.
async fn wait_saved(server: &Server) -> Value {
    server
        .eventually(30, "vault_info", json!({}), |v| {
            v["index"]["cache_saved"].is_string()
        })
        .await["index"]
        .clone()
}

/// Paths of the ranked hits for `query`.
async fn ranked(server: &Server, query: &str) -> Vec<String> {
    let r = server
        .ok("search_notes", json!({"query": query, "mode": "ranked"}))
        .await;
    let mut paths: Vec<String> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap().to_owned())
        .collect();
    paths.dedup();
    paths
}

fn vault() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            ("Birds/Finch.md", "# Finch\nA zebrafinch sang.\n"),
            ("Mammals/Marmot.md", "# Marmot\nThe marmot whistles.\n"),
            ("Mammals/Otter.md", "# Otter\nThe otter floats.\n"),
            ("Plants/Fern.md", "# Fern\nFronds of the fern.\n"),
        ],
    );
    tmp
}

#[tokio::test]
async fn a_restart_reuses_the_cached_index_and_catches_up_with_changes_made_while_stopped() {
    let v = vault();
    let cache = tempfile::tempdir().unwrap();
    let (server, index) = start_cached(v.path(), cache.path()).await;
    assert_eq!(index["cache"], "new", "{index}");
    assert_eq!(ranked(&server, "zebrafinch").await, ["Birds/Finch.md"]);
    wait_saved(&server).await;
    server.stop().await;

    // While stopped: edit one note, delete one, add one, move one.
    let root = v.path();
    std::thread::sleep(Duration::from_millis(20)); // a new mtime even on coarse clocks
    std::fs::write(root.join("Birds/Finch.md"), "# Finch\nAn ocelot watched.\n").unwrap();
    std::fs::remove_file(root.join("Mammals/Marmot.md")).unwrap();
    write_tree(root, &[("Mammals/Pangolin.md", "# Pangolin\nScales.\n")]);
    std::fs::rename(root.join("Mammals/Otter.md"), root.join("Otter.md")).unwrap();

    let (server, index) = start_cached(v.path(), cache.path()).await;
    // Only the untouched note (Fern) kept its document; the other three were indexed again.
    assert_eq!(index["cache"], "reused 1 of 4 notes", "{index}");
    assert_eq!(index["documents"], 4, "{index}");
    assert!(ranked(&server, "zebrafinch").await.is_empty());
    assert_eq!(ranked(&server, "ocelot").await, ["Birds/Finch.md"]);
    assert!(ranked(&server, "marmot").await.is_empty());
    assert_eq!(ranked(&server, "pangolin").await, ["Mammals/Pangolin.md"]);
    assert_eq!(ranked(&server, "otter").await, ["Otter.md"]);
    assert_eq!(ranked(&server, "fronds").await, ["Plants/Fern.md"]);
    wait_saved(&server).await;
    server.stop().await;

    // Nothing changed this time: every note comes from the cache.
    let (server, index) = start_cached(v.path(), cache.path()).await;
    assert_eq!(index["cache"], "reused 4 of 4 notes", "{index}");
    assert_eq!(ranked(&server, "pangolin").await, ["Mammals/Pangolin.md"]);
    server.stop().await;
}

#[tokio::test]
async fn after_a_restart_the_cached_index_answers_while_it_is_checked_and_says_so() {
    let v = vault();
    let cache = tempfile::tempdir().unwrap();
    let (server, _) = start_cached(v.path(), cache.path()).await;
    wait_saved(&server).await;
    server.stop().await;
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(
        v.path().join("Plants/Fern.md"),
        "# Fern
A quokka hid.
",
    )
    .unwrap();

    // The build pauses 3 s after opening the cache: the saved index answers meanwhile.
    let until = Instant::now() + Duration::from_secs(20);
    let server = loop {
        let server = Server::start_with(
            v.path(),
            &[
                "--index-cache",
                cache.path().to_str().unwrap(),
                "--index-delay",
                "3000",
            ],
        )
        .await;
        let r = server
            .eventually(10, "search_notes", json!({"query": "marmot"}), |r| {
                r["served_by"] != "scan"
                    || r["index"]["cache"]
                        .as_str()
                        .is_some_and(|c| c.contains("another capvault process"))
            })
            .await;
        if r["served_by"] == "cached_index" {
            assert_eq!(r["hits"][0]["path"], "Mammals/Marmot.md", "{r}");
            assert_eq!(r["index"]["state"], "building", "{r}");
            assert!(
                r["notes"][0]
                    .as_str()
                    .unwrap()
                    .contains("saved by the last run"),
                "{r}"
            );
            break server;
        }
        // The previous process still held the cache's lock: no cache, a scan. Try again.
        assert!(
            Instant::now() < until,
            "never served from the cached index: {r}"
        );
        server.stop().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let info = server.ok("vault_info", json!({})).await;
    assert_eq!(info["index"]["state"], "building", "{info}");
    assert_eq!(
        info["index"]["documents"], 4,
        "the saved index is searchable: {info}"
    );
    // As of the last run until the check is done: the new word is not known yet...
    let r = server.ok("search_notes", json!({"query": "quokka"})).await;
    assert_eq!(r["served_by"], "cached_index", "{r}");
    assert_eq!(r["total"], 0, "{r}");
    // ...and is once the build has compared the vault with it.
    server.wait_index_ready().await;
    let r = server.ok("search_notes", json!({"query": "quokka"})).await;
    assert_eq!(r["served_by"], "index", "{r}");
    assert_eq!(r["hits"][0]["path"], "Plants/Fern.md", "{r}");
    server.stop().await;
}

/// The one folder below `cache` that holds a vault's index files.
fn vault_cache_folder(cache: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(cache.join("index-1"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.pop().unwrap()
}

#[tokio::test]
async fn a_damaged_or_outdated_index_cache_is_set_aside_and_rebuilt() {
    let v = vault();
    let cache = tempfile::tempdir().unwrap();
    let (server, _) = start_cached(v.path(), cache.path()).await;
    wait_saved(&server).await;
    server.stop().await;

    // Flip a byte in the middle of every segment file.
    let folder = vault_cache_folder(cache.path());
    let mut damaged = 0;
    for p in segment_files(cache.path()) {
        let mut bytes = std::fs::read(&p).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x55;
        std::fs::write(&p, bytes).unwrap();
        damaged += 1;
    }
    assert!(damaged > 0);
    let (server, index) = start_cached(v.path(), cache.path()).await;
    let state = index["cache"].as_str().unwrap();
    assert!(state.starts_with("rebuilt: "), "{index}");
    assert!(!state.contains(cache.path().to_str().unwrap()), "{state}");
    assert_eq!(ranked(&server, "zebrafinch").await, ["Birds/Finch.md"]);
    assert_eq!(ranked(&server, "marmot").await, ["Mammals/Marmot.md"]);
    wait_saved(&server).await;
    server.stop().await;

    // A cache written by another version of capvault is not trusted either.
    let manifest = folder.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut m: Value = serde_json::from_str(&text).unwrap();
    m["format"] = json!("capvault index 0, tantivy 0.1");
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let (server, index) = start_cached(v.path(), cache.path()).await;
    assert!(
        index["cache"]
            .as_str()
            .unwrap()
            .starts_with("rebuilt: the cache was written by another version"),
        "{index}"
    );
    assert_eq!(ranked(&server, "otter").await, ["Mammals/Otter.md"]);
    server.stop().await;
}

#[tokio::test]
async fn an_index_cache_folder_inside_the_vault_is_refused_even_through_a_symlink() {
    let v = vault();
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("link");
    std::os::unix::fs::symlink(v.path().join("Plants"), &link).unwrap();
    for cache in [v.path().join("cache/index"), link.join("cache")] {
        let (server, index) = start_with_cache(v.path(), &cache).await;
        assert_eq!(
            index["cache"],
            "unavailable: the index cache folder is inside the vault; it must be outside",
            "{cache:?}: {index}"
        );
        // Search works all the same, from memory.
        assert_eq!(ranked(&server, "fern").await, ["Plants/Fern.md"]);
        server.stop().await;
    }
    // Nothing was created inside the vault.
    assert!(!v.path().join("cache").exists());
    assert!(!v.path().join("Plants/cache").exists());
}

#[tokio::test]
async fn a_second_server_on_the_same_vault_and_cache_runs_without_the_cache() {
    let v = vault();
    let cache = tempfile::tempdir().unwrap();
    let (first, index) = start_cached(v.path(), cache.path()).await;
    assert_eq!(index["cache"], "new", "{index}");
    let (second, index) = start_with_cache(v.path(), cache.path()).await;
    assert_eq!(
        index["cache"],
        "unavailable: another capvault process is using the index cache of this vault",
        "{index}"
    );
    assert_eq!(ranked(&second, "marmot").await, ["Mammals/Marmot.md"]);
    second.stop().await;
    first.stop().await;
}

#[tokio::test]
async fn the_default_index_cache_lives_in_the_users_cache_folder_and_can_be_turned_off() {
    let v = vault();
    let home = tempfile::tempdir().unwrap();
    let spawn = |extra: &'static [&'static str]| {
        let mut cmd = crate::common::serve_command(v.path(), extra);
        cmd.env("XDG_CACHE_HOME", home.path());
        cmd
    };
    let off = Server::from_command(spawn(&["--no-index-cache"])).await;
    let index = off.wait_index_ready().await;
    assert_eq!(index["cache"], "off", "{index}");
    off.stop().await;
    assert!(!home.path().join("capvault").exists());

    let on = Server::from_command(spawn(&[])).await;
    on.wait_index_ready().await;
    wait_saved(&on).await;
    on.stop().await;
    let folder = vault_cache_folder(&home.path().join("capvault"));
    assert!(folder.join("manifest.json").is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "cache folder readable by others: {mode:o}");
}

#[tokio::test]
async fn a_cache_that_cannot_be_written_is_reported_and_search_goes_on() {
    let v = vault();
    let cache = tempfile::tempdir().unwrap();
    // A folder where the manifest's temporary file goes, made before the server starts (the
    // vault's cache folder is named after the vault root's device and inode): every save fails
    // at its last step.
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata(v.path()).unwrap();
    let folder = cache
        .path()
        .join("index-1")
        .join(format!("{:x}-{:x}", root.dev(), root.ino()));
    std::fs::create_dir_all(folder.join("manifest.json.tmp")).unwrap();
    let (server, _) = start_cached(v.path(), cache.path()).await;
    let info = server
        .eventually(30, "vault_info", json!({}), |v| {
            v["index"]["last_error"].is_string()
        })
        .await;
    let error = info["index"]["last_error"].as_str().unwrap();
    assert!(
        error.starts_with("index cache not saved: manifest.json"),
        "{info}"
    );
    assert!(!error.contains(cache.path().to_str().unwrap()), "{error}");
    assert!(info["index"]["cache_saved"].is_null(), "{info}");
    assert_eq!(ranked(&server, "otter").await, ["Mammals/Otter.md"]);
    server.stop().await;
}

#[tokio::test]
async fn a_cache_folder_that_refuses_writes_costs_no_search_results() {
    // 300 notes: the index's positions file is far larger than the 8 KiB the server may write
    // to any file (RLIMIT_FSIZE, with SIGXFSZ ignored so a write past it fails with EFBIG, as
    // on a full disk).
    let v = tempfile::tempdir().unwrap();
    let files: Vec<(String, String)> = (0..300)
        .map(|i| {
            let words: String = (0..60)
                .map(|w| format!("word{} ", (i * 7 + w) % 500))
                .collect();
            (
                format!("n{i:03}.md"),
                format!("shared text {words}\nmarker{i} follows here\n"),
            )
        })
        .collect();
    write_tree(v.path(), &files);
    let cache = tempfile::tempdir().unwrap();
    let mut cmd =
        crate::common::serve_command(v.path(), &["--index-cache", cache.path().to_str().unwrap()]);
    // SAFETY: between fork and exec the closure only calls `signal` and `setrlimit`, both
    // async-signal-safe, and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 8 << 10,
                rlim_max: 8 << 10,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let server = Server::from_command(cmd).await;
    let index = server.wait_index_ready().await;
    assert_eq!(index["documents"], 300, "{index}");
    // Phrases read the positions: they moved to memory when the folder refused them.
    let r = server
        .ok(
            "search_notes",
            json!({"query": "\"marker299 follows\"", "mode": "ranked"}),
        )
        .await;
    assert_eq!(r["hits"][0]["path"], "n299.md", "{r}");
    assert_eq!(r["total"], 1, "{r}");
    let r = server
        .ok(
            "search_notes",
            json!({"query": "\"shared text\"", "limit": 1}),
        )
        .await;
    assert_eq!(r["total"], 300, "{r}");
    // The notes' texts, refused by the folder too, stayed in memory: exact search finds lines.
    let r = server
        .ok(
            "search_notes",
            json!({"query": "marker299 follows", "mode": "exact"}),
        )
        .await;
    assert_eq!(r["hits"][0]["path"], "n299.md", "{r}");
    assert_eq!(r["hits"][0]["line"], 2, "{r}");
    let r = server
        .ok(
            "search_notes",
            json!({"query": "follows here", "mode": "regex", "limit": 1}),
        )
        .await;
    assert_eq!(r["total"], 300, "{r}");
    server.stop().await;
}

#[tokio::test]
async fn cached_segment_files_cut_short_while_serving_never_crash_the_server() {
    let v = vault();
    let cache = tempfile::tempdir().unwrap();
    let (server, _) = start_cached(v.path(), cache.path()).await;
    wait_saved(&server).await;
    server.stop().await;
    let (server, index) = start_cached(v.path(), cache.path()).await;
    assert_eq!(index["cache"], "reused 4 of 4 notes", "{index}");
    // The loaded positions files are read from the cache folder as phrase queries need them:
    // cut every cache file short behind the server's back.
    for p in segment_files(cache.path()) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(0)
            .unwrap();
    }
    let mut errors = 0;
    for query in ["zebrafinch", "\"the marmot\"", "otter floats"] {
        // An answer or a short error reply naming no host path, never a lost server.
        let r = server
            .call("search_notes", json!({"query": query, "mode": "ranked"}))
            .await;
        if r.is_error {
            errors += 1;
            assert!(
                r.text.starts_with("unavailable: search index error"),
                "{}",
                r.text
            );
            assert_eq!(r.error["code"], "unavailable", "{}", r.raw);
            assert!(
                !r.text.contains(cache.path().to_str().unwrap()),
                "{}",
                r.text
            );
        }
    }
    // The phrase really did read positions from the folder at query time.
    assert!(errors > 0);
    let info = server.ok("vault_info", json!({})).await;
    assert_eq!(info["index"]["state"], "ready", "{info}");
    server.stop().await;
}
