//! Semantic and hybrid search and `related_notes`, through the real binary with a tiny static
//! model written by the test (word groups that share a direction: no files needed).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;

use crate::common::{Server, symlink, write_model, write_tree};
use serde_json::{Value, json};

fn vault(root: &Path) {
    write_tree(
        root,
        &[
            ("Puppy.md", "# Training\nMy puppy learns to sit. [[Oven]]\n"),
            ("Hound.md", "A hound is a canine kept as a pet.\n"),
            (
                "Rides/Bike.md",
                "# Weekend\nCycling on two wheels, pedal hard.\n",
            ),
            (
                "Oven.md",
                "# Sourdough\nThe dough rises with yeast; the loaf bakes.\n",
            ),
            (
                "Notes/Mixed.md",
                "## Pets\nA dog.\n## Food\nbread and baking\n",
            ),
        ],
    );
}

async fn start(root: &Path, model: &Path) -> Server {
    let s = Server::start_with(root, &["--embedding-model", model.to_str().unwrap()]).await;
    s.eventually(30, "vault_info", json!({}), |i| {
        i["embedding"]["state"] == "ready"
    })
    .await;
    s
}

fn paths(reply: &Value) -> Vec<String> {
    let key = if reply["hits"].is_array() {
        "hits"
    } else {
        "related"
    };
    crate::common::paths_at(reply, key)
}

#[tokio::test]
async fn semantic_search_finds_notes_that_share_no_word_with_the_query() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, model) = (tmp.path().join("v"), tmp.path().join("m"));
    vault(&root);
    write_model(&model);
    let s = start(&root, &model).await;
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["embedding"]["model"], "groups-test");
    assert_eq!(info["embedding"]["revision"], "r1");
    assert_eq!(info["embedding"]["dimensions"], 5);
    assert_eq!(info["embedding"]["embedded"], 5);

    // "bicycle" is in no note; its group is.
    let r = s
        .ok(
            "search_notes",
            json!({"query": "bicycle", "mode": "semantic"}),
        )
        .await;
    assert_eq!(r["mode"], "semantic");
    assert_eq!(paths(&r)[0], "Rides/Bike.md");
    assert_eq!(r["hits"][0]["heading"], "Weekend");
    assert_eq!(r["hits"][0]["line"], 2, "{r}");
    assert!(
        r["hits"][0]["excerpt"]
            .as_str()
            .unwrap()
            .starts_with("Cycling")
    );
    // Ranked finds nothing for it.
    let r = s
        .ok(
            "search_notes",
            json!({"query": "bicycle", "mode": "ranked"}),
        )
        .await;
    assert_eq!(r["total"], 0);
    // The best section of a mixed note is the one that matches.
    let r = s
        .ok(
            "search_notes",
            json!({"query": "oven", "mode": "semantic", "limit": 2}),
        )
        .await;
    let mut got = paths(&r);
    got.sort();
    assert_eq!(got, ["Notes/Mixed.md", "Oven.md"]);
    let mixed = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["path"] == "Notes/Mixed.md");
    assert_eq!(mixed.unwrap()["heading"], "Food");
    // Filters hold: only under Notes/.
    let r = s
        .ok(
            "search_notes",
            json!({"query": "canine", "mode": "semantic", "folder": "Notes"}),
        )
        .await;
    assert_eq!(paths(&r), ["Notes/Mixed.md"]);
    // Without a mode, hybrid runs: a word match and a meaning match both rank.
    let r = s.ok("search_notes", json!({"query": "puppy"})).await;
    assert_eq!(r["mode"], "hybrid");
    assert_eq!(r["served_by"], "index+vectors");
    let got = paths(&r);
    assert_eq!(got[0], "Puppy.md", "{r}");
    assert!(got.contains(&"Hound.md".to_owned()), "{r}");
    assert_eq!(r["hits"][0]["matches"][0], json!([3, 8]), "{r}");
    // Paging: a cursor continues the fused list.
    let pages = s
        .pages("search_notes", json!({"query": "puppy", "limit": 1}))
        .await;
    let paged: Vec<String> = pages.iter().flat_map(paths).collect();
    assert_eq!(paged, got);
    s.stop().await;
}

#[tokio::test]
async fn related_notes_suggests_unlinked_notes_and_refuses_paths_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, model) = (tmp.path().join("v"), tmp.path().join("m"));
    vault(&root);
    write_tree(
        &root,
        &[(".hidden/Dog.md", "dog dog"), ("Private.md", "secret")],
    );
    std::fs::write(tmp.path().join("outside.md"), "puppy canine hound").unwrap();
    symlink(&root, "Out.md", tmp.path().join("outside.md"));
    write_model(&model);
    let s = start(&root, &model).await;
    let r = s.ok("related_notes", json!({"path": "Hound"})).await;
    assert_eq!(r["path"], "Hound.md");
    let mut got = paths(&r);
    got[..2].sort();
    assert_eq!(got[..2], ["Notes/Mixed.md", "Puppy.md"], "{r}");
    assert!(!got.contains(&"Hound.md".to_owned()));
    // Puppy links to Oven: with unlinked_only, Oven is not suggested for Puppy.
    let all = paths(
        &s.ok("related_notes", json!({"path": "Puppy.md", "limit": 50}))
            .await,
    );
    assert!(all.contains(&"Oven.md".to_owned()));
    let unlinked = s
        .ok(
            "related_notes",
            json!({"path": "Puppy.md", "limit": 50, "unlinked_only": true}),
        )
        .await;
    assert!(
        !paths(&unlinked).contains(&"Oven.md".to_owned()),
        "{unlinked}"
    );
    // From Oven's side the backlink counts too.
    let unlinked = s
        .ok(
            "related_notes",
            json!({"path": "Oven.md", "limit": 50, "unlinked_only": true}),
        )
        .await;
    assert!(
        !paths(&unlinked).contains(&"Puppy.md".to_owned()),
        "{unlinked}"
    );
    // Nothing hidden or outside is ever a result, nor a starting point.
    for p in &all {
        assert!(!p.starts_with('.') && p != "Out.md", "{p}");
    }
    for bad in [
        "../outside.md",
        "/etc/passwd",
        ".hidden/Dog.md",
        "Out.md",
        "Nope",
    ] {
        let r = s.call("related_notes", json!({"path": bad})).await;
        assert!(r.is_error, "{bad}: {}", r.raw);
        assert!(
            !r.raw.contains(tmp.path().to_str().unwrap()),
            "{bad} leaks: {}",
            r.raw
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn an_edited_note_is_found_by_its_new_meaning_within_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, model) = (tmp.path().join("v"), tmp.path().join("m"));
    vault(&root);
    write_model(&model);
    let s = start(&root, &model).await;
    std::fs::write(root.join("Hound.md"), "Now about a loaf in the oven.\n").unwrap();
    let q = json!({"query": "yeast", "mode": "semantic", "limit": 3});
    s.eventually(10, "search_notes", q, |r| {
        paths(r).contains(&"Hound.md".to_owned())
    })
    .await;
    std::fs::remove_file(root.join("Oven.md")).unwrap();
    let q = json!({"query": "yeast", "mode": "semantic"});
    s.eventually(10, "search_notes", q, |r| {
        !paths(r).contains(&"Oven.md".to_owned())
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn without_a_model_semantic_modes_say_how_to_get_one() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s.ok("search_notes", json!({"query": "puppy"})).await;
    assert_eq!(r["mode"], "ranked");
    let r = s
        .call("search_notes", json!({"query": "puppy", "mode": "hybrid"}))
        .await;
    assert!(r.is_error);
    assert_eq!(r.error["code"], "refused", "{}", r.raw);
    assert!(r.text.contains("--embedding-model"), "{}", r.text);
    let tools = s.client.list_all_tools().await.unwrap();
    assert!(!tools.iter().any(|t| t.name == "related_notes"));
    assert!(
        s.ok("vault_info", json!({}))
            .await
            .get("embedding")
            .is_none()
    );
    s.stop().await;
}

/// The stderr of `capvault serve` with the model folder `model` (it must exit with an error).
fn startup_error(vault: &Path, model: &Path) -> String {
    let out = crate::common::capvault()
        .arg("serve")
        .arg(vault)
        .args(["--embedding-model", model.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_bad_model_folder_is_a_clear_startup_error() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("m");
    write_model(&model);
    std::fs::write(model.join("model.safetensors"), b"\x08\0\0\0\0\0\0\0{}").unwrap();
    let err = startup_error(tmp.path(), &model);
    assert!(err.contains("model.safetensors"), "{err}");
    std::fs::remove_file(model.join("tokenizer.json")).unwrap();
    let err = startup_error(tmp.path(), &model);
    assert!(err.contains("tokenizer.json"), "{err}");
    // A model of a kind capvault does not run, and a BERT folder whose weights are not BERT's.
    write_model(&model);
    std::fs::write(
        model.join("config.json"),
        r#"{"model_type": "xlm-roberta"}"#,
    )
    .unwrap();
    let err = startup_error(tmp.path(), &model);
    assert!(
        err.contains("xlm-roberta") && err.contains("model import"),
        "{err}"
    );
    std::fs::write(
        model.join("config.json"),
        r#"{"model_type": "bert", "vocab_size": 64, "hidden_size": 4, "num_hidden_layers": 1,
            "num_attention_heads": 1, "intermediate_size": 8, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "max_position_embeddings": 16, "type_vocab_size": 2,
            "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0}"#,
    )
    .unwrap();
    let err = startup_error(tmp.path(), &model);
    assert!(err.contains("model.safetensors"), "{err}");
}

/// Starts on `root` with the model and the index cache in `cache` and waits for embedding,
/// retrying while the previous process (stopped just before) still holds the cache's lock.
async fn start_cached(root: &Path, model: &Path, cache: &Path) -> (Server, Value) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let s = Server::start_with(
            root,
            &[
                "--embedding-model",
                model.to_str().unwrap(),
                "--index-cache",
                cache.to_str().unwrap(),
            ],
        )
        .await;
        let info = s
            .eventually(30, "vault_info", json!({}), |i| {
                i["embedding"]["state"] == "ready"
            })
            .await;
        let busy = info["index"]["cache"]
            .as_str()
            .is_some_and(|c| c.contains("another capvault process"));
        if !busy {
            return (s, info);
        }
        assert!(std::time::Instant::now() < until, "cache still locked");
        s.stop().await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The embeddings cache file under `cache`, once a server has saved it.
fn saved_vectors(cache: &Path) -> std::path::PathBuf {
    for _ in 0..200 {
        for vault_dir in std::fs::read_dir(cache.join("index-1")).unwrap() {
            let f = vault_dir.unwrap().path().join("embeddings.bin");
            if f.is_file() {
                return f;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no embeddings cache was saved");
}

/// The first `limit` notes of a semantic search.
async fn semantic_paths(s: &Server, query: &str, limit: u32) -> Vec<String> {
    paths(
        &s.ok(
            "search_notes",
            json!({"query": query, "mode": "semantic", "limit": limit}),
        )
        .await,
    )
}

#[tokio::test]
async fn a_restart_reuses_saved_vectors_and_re_embeds_only_what_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, model, cache) = (
        tmp.path().join("v"),
        tmp.path().join("m"),
        tmp.path().join("cache"),
    );
    vault(&root);
    write_model(&model);
    let (s, info) = start_cached(&root, &model, &cache).await;
    assert_eq!(info["embedding"]["cache"], "new", "{info}");
    assert_eq!(semantic_paths(&s, "bicycle", 1).await[0], "Rides/Bike.md");
    let file = saved_vectors(&cache);
    s.stop().await;

    // While stopped: one note changes meaning, one is deleted.
    std::fs::write(root.join("Hound.md"), "Fresh bread from the oven.\n").unwrap();
    std::fs::remove_file(root.join("Rides/Bike.md")).unwrap();
    let (s, info) = start_cached(&root, &model, &cache).await;
    assert_eq!(info["embedding"]["cache"], "reused 3 of 4 notes", "{info}");
    assert_eq!(info["embedding"]["embedded"], 4);
    // Three notes are about bread now; two about pets; none about bikes.
    let mut bread = semantic_paths(&s, "loaf", 3).await;
    bread.sort();
    assert_eq!(bread, ["Hound.md", "Notes/Mixed.md", "Oven.md"]);
    let mut pets = semantic_paths(&s, "canine", 2).await;
    pets.sort();
    assert_eq!(pets, ["Notes/Mixed.md", "Puppy.md"]);
    assert!(
        !semantic_paths(&s, "bicycle", 10)
            .await
            .contains(&"Rides/Bike.md".to_owned())
    );
    s.stop().await;

    // A damaged file is never used: every note is embedded again, and answers stay right.
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let (s, info) = start_cached(&root, &model, &cache).await;
    assert_eq!(
        info["embedding"]["cache"], "rebuilt: the embeddings cache fails its checksum",
        "{info}"
    );
    let mut bread = semantic_paths(&s, "loaf", 3).await;
    bread.sort();
    assert_eq!(bread, ["Hound.md", "Notes/Mixed.md", "Oven.md"]);
    s.stop().await;

    // A symlink planted in its place is not followed (and not left there).
    let elsewhere = tmp.path().join("elsewhere.bin");
    std::fs::write(&elsewhere, b"planted").unwrap();
    let _ = std::fs::remove_file(&file);
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let (s, info) = start_cached(&root, &model, &cache).await;
    assert!(
        info["embedding"]["cache"]
            .as_str()
            .unwrap()
            .starts_with("rebuilt: cannot read"),
        "{info}"
    );
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"planted");
    s.stop().await;

    // Vectors of another model are another space: refused, not mixed in.
    let other = tmp.path().join("m2");
    write_model(&other);
    let config = other.join("config.json");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("r1", "r2");
    std::fs::write(&config, text).unwrap();
    let (s, info) = start_cached(&root, &other, &cache).await;
    assert_eq!(
        info["embedding"]["cache"], "rebuilt: the embeddings cache was made by another model",
        "{info}"
    );
    s.stop().await;
}

/// A footer shared by many notes (a template's fixed lines) is left out of what is embedded:
/// otherwise every note that carries it would match a query about the footer's words.
#[tokio::test]
async fn a_footer_many_notes_share_does_not_make_them_match_its_words() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, model) = (tmp.path().join("v"), tmp.path().join("m"));
    let dogs: Vec<(String, String)> = (1..=9)
        .map(|i| {
            (
                format!("Dogs/Dog {i}.md"),
                format!("My puppy number {i} is a good hound.\n# Footer\nbread and baking\n"),
            )
        })
        .collect();
    let mut files: Vec<(&str, &str)> = dogs.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    files.push(("Oven.md", "The dough rises with yeast.\n"));
    files.push(("Bike.md", "Cycling on two wheels with a loaf.\n"));
    write_tree(&root, &files);
    write_model(&model);
    let cache = tmp.path().join("cache");
    let (s, info) = start_cached(&root, &model, &cache).await;
    // One section per note: the footers are gone.
    assert_eq!(info["embedding"]["sections"], 11, "{info}");
    let r = s
        .ok(
            "search_notes",
            json!({"query": "oven", "mode": "semantic", "limit": 2}),
        )
        .await;
    assert_eq!(paths(&r), ["Oven.md", "Bike.md"], "{r}");
    saved_vectors(&cache);
    s.stop().await;
    // A restart reuses the vectors and the lines they were made without: a note added while
    // the server was stopped leaves the footer out too, without the vault being counted again.
    write_tree(
        &root,
        &[("Dogs/Dog 10.md", "A canine.\n# Footer\nbread and baking\n")],
    );
    let (s, info) = start_cached(&root, &model, &cache).await;
    assert_eq!(
        info["embedding"]["cache"], "reused 11 of 12 notes",
        "{info}"
    );
    assert_eq!(info["embedding"]["sections"], 12, "{info}");
    s.stop().await;
}
