//! Search quality on real notes: the labelled queries of `tests/quality/queries.jsonl` (on
//! ../shared/vaults: paraphrases that share no content word with the note they should find,
//! checked by `tests/quality/check.py`, and ordinary keyword queries), run in `ranked`,
//! `semantic` and `hybrid` modes with a real static model (`CAPVAULT_EMBEDDING_MODEL`, a folder
//! made by `capvault model import`; CI sets it and `CAPVAULT_REQUIRE_MODEL=1`). Prints recall@5
//! and MRR per mode and kind. The issue's target for hybrid is 20 points of recall@5 above
//! ranked on paraphrases: the transformer meets it, and so does a static model tuned on the
//! vault it serves (`model import --corpus`); two ignored tests, minutes long, measure them by
//! hand. CI's plain import reaches about 12 (docs/performance.md), so this test holds a floor
//! under that: hybrid at least 10 points above ranked on paraphrases (CI imports the model
//! afresh, and an import's floating-point sums may move a query or two), and within 2 points of
//! ranked on keyword queries. CI also serves a small vault with the transformer
//! (`CAPVAULT_TRANSFORMER_MODEL`, the folder the static model is imported from).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capvault::engine::{Engine, EngineOptions, IndexCache};
use capvault::notes::search::{Mode, SearchQuery, search};
use capvault::vault::{Limits, Vault};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Labelled {
    vault: String,
    kind: String,
    query: String,
    expect: Vec<String>,
}

/// The static model folder, or `None` (and a note) when it is not configured and not required.
fn model_dir() -> Option<PathBuf> {
    crate::common::model_folder("CAPVAULT_EMBEDDING_MODEL", "semantic quality")
}

fn engine_for(root: &std::path::Path, model: &std::path::Path) -> Arc<Engine> {
    let vault = Vault::open(root, Limits::default()).unwrap();
    let engine = Engine::open(
        vault,
        EngineOptions {
            watch: false,
            ..EngineOptions::default()
        },
        IndexCache::Off,
    );
    engine.set_embedding_model(
        capvault::semantic::load_model(&capvault::vault::host::Host::claim(), model).unwrap(),
    );
    engine.start();
    let until = Instant::now() + Duration::from_secs(600);
    while engine.embedding_status().unwrap().state != "ready" {
        assert!(Instant::now() < until, "embedding did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    engine
}

/// (hits in the top 5, sum of reciprocal ranks in the top 20, queries).
type Score = (usize, f64, usize);

/// Counts one query whose expected note came at `rank` (0-based, within the top 20), if at all.
fn tally(score: &mut Score, rank: Option<usize>) {
    score.2 += 1;
    if let Some(i) = rank {
        score.1 += 1.0 / (i as f64 + 1.0);
        if i < 5 {
            score.0 += 1;
        }
    }
}

/// The labelled queries.
fn labelled() -> Vec<Labelled> {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/quality/queries.jsonl"),
    )
    .unwrap()
    .lines()
    .filter(|l| !l.trim().is_empty())
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

/// The queries by vault.
fn by_vault(labelled: &[Labelled]) -> BTreeMap<&str, Vec<&Labelled>> {
    let mut vaults: BTreeMap<&str, Vec<&Labelled>> = BTreeMap::new();
    for l in labelled {
        vaults.entry(l.vault.as_str()).or_default().push(l);
    }
    vaults
}

/// Every labelled query in every mode, with the model in `model`: (mode, kind) → score, and
/// printed. `None` when a shared vault is missing (and not required).
fn measure(model: &std::path::Path) -> Option<BTreeMap<(&'static str, String), Score>> {
    let labelled = labelled();
    let vaults = by_vault(&labelled);
    // (mode, kind) → score.
    let mut scores: BTreeMap<(&'static str, String), Score> = BTreeMap::new();
    let modes = [
        ("ranked", Mode::Ranked),
        ("semantic", Mode::Semantic),
        ("hybrid", Mode::Hybrid),
    ];
    for (name, queries) in vaults {
        let root = crate::common::shared_vault(name)?;
        let started = Instant::now();
        let engine = engine_for(&root, model);
        let status = engine.embedding_status().unwrap();
        eprintln!(
            "{name}: {} notes, {} sections embedded in {} ms (ready after {} ms)",
            status.embedded,
            status.sections,
            status.embed_ms.unwrap_or(0),
            started.elapsed().as_millis()
        );
        for q in queries {
            for (mode_name, mode) in modes {
                let r = search(&engine, &SearchQuery::new(q.query.clone(), mode, 20)).unwrap();
                let rank = r.hits.iter().position(|h| q.expect.contains(&h.path));
                tally(scores.entry((mode_name, q.kind.clone())).or_default(), rank);
            }
        }
        engine.shutdown();
    }
    let pct = |s: &Score| 100.0 * s.0 as f64 / s.2.max(1) as f64;
    println!("\nmode      kind        queries  recall@5   MRR");
    for ((mode, kind), s) in &scores {
        println!(
            "{mode:<9} {kind:<11} {:>7}  {:>7.1}%  {:.3}",
            s.2,
            pct(s),
            s.1 / s.2.max(1) as f64
        );
    }
    Some(scores)
}

#[test]
fn hybrid_search_finds_paraphrased_notes_that_ranked_search_misses() {
    let Some(model) = model_dir() else { return };
    let Some(scores) = measure(&model) else {
        return;
    };
    let pct = |s: &Score| 100.0 * s.0 as f64 / s.2.max(1) as f64;
    let get = |m: &'static str, k: &str| scores[&(m, k.to_owned())];
    let (ranked_p, hybrid_p) = (
        pct(&get("ranked", "paraphrase")),
        pct(&get("hybrid", "paraphrase")),
    );
    let (ranked_k, hybrid_k) = (
        pct(&get("ranked", "keyword")),
        pct(&get("hybrid", "keyword")),
    );
    assert!(
        hybrid_p >= ranked_p + 10.0,
        "paraphrases: hybrid recall@5 {hybrid_p:.1}% is not 10 points above ranked {ranked_p:.1}%"
    );
    assert!(
        hybrid_k >= ranked_k - 2.0,
        "keyword queries: hybrid recall@5 {hybrid_k:.1}% is more than 2 points below ranked \
         {ranked_k:.1}%"
    );
}

/// The sentence-transformers folder a static model was imported from
/// (`CAPVAULT_TRANSFORMER_MODEL`), or `None` when it is not set and not required.
/// The transformer itself as the embedding model (the option for small vaults), on the whole
/// labelled set: the issue's targets, hybrid 20 points of paraphrase recall@5 above ranked and
/// within 2 points of it on keyword queries. Minutes of inference (obsidian-hub's 15,000
/// sections), so run by hand in a release build: `CAPVAULT_TRANSFORMER_MODEL=ST_DIR cargo test
/// --release --test integration -- --ignored --nocapture semantic_quality::hybrid_search_with_the_transformer`.
#[test]
#[ignore = "minutes of transformer inference; run by hand (see the doc comment)"]
fn hybrid_search_with_the_transformer_meets_the_quality_targets() {
    let Some(model) = crate::common::transformer_dir("semantic quality") else {
        return;
    };
    let Some(scores) = measure(&model) else {
        return;
    };
    assert_issue_targets(&scores);
}

/// A static model tuned on the vault it serves (`capvault model import --corpus`, the binary as
/// users run it, on obsidian-hub, where 114 of the 132 paraphrases are): the issue's targets, as
/// above. The import runs the transformer over the vault's sections, about nine minutes in a
/// release build, so run by hand: `CAPVAULT_TRANSFORMER_MODEL=ST_DIR cargo test --release --test
/// semantic_quality -- --ignored --nocapture hybrid_search_with_a_model_tuned`.
#[test]
#[ignore = "minutes of transformer inference; run by hand (see the doc comment)"]
fn hybrid_search_with_a_model_tuned_on_the_vault_meets_the_quality_targets() {
    let Some(transformer) = crate::common::transformer_dir("semantic quality") else {
        return;
    };
    let Some(hub) = crate::common::shared_vault("obsidian-hub") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tuned");
    let status = crate::common::capvault()
        .args(["model", "import"])
        .arg(&transformer)
        .arg("--out")
        .arg(&out)
        .arg("--corpus")
        .arg(&hub)
        .status()
        .unwrap();
    assert!(status.success(), "model import --corpus failed");
    let Some(scores) = measure(&out) else {
        return;
    };
    assert_issue_targets(&scores);
}

/// The issue's quality targets: hybrid recall@5 at least 20 points above ranked on paraphrases,
/// and within 2 points of it on keyword queries.
fn assert_issue_targets(scores: &BTreeMap<(&'static str, String), Score>) {
    let pct = |m: &'static str, k: &str| {
        let s = scores[&(m, k.to_owned())];
        100.0 * s.0 as f64 / s.2.max(1) as f64
    };
    let (hybrid, ranked) = (pct("hybrid", "paraphrase"), pct("ranked", "paraphrase"));
    assert!(
        hybrid >= ranked + 20.0,
        "paraphrases: hybrid {hybrid:.1}% vs ranked {ranked:.1}%"
    );
    let (hybrid, ranked) = (pct("hybrid", "keyword"), pct("ranked", "keyword"));
    assert!(
        hybrid >= ranked - 2.0,
        "keywords: hybrid {hybrid:.1}% vs ranked {ranked:.1}%"
    );
}

/// The transformer as the embedding model, through the server: loaded from a
/// sentence-transformers folder as it is, every note of kepano-obsidian embedded, and a
/// paraphrase that shares no word with its note finds it by meaning.
#[tokio::test]
async fn a_sentence_transformers_folder_serves_as_a_transformer() {
    let Some(model) = crate::common::transformer_dir("semantic quality") else {
        return;
    };
    let Some(root) = crate::common::shared_vault("kepano-obsidian") else {
        return;
    };
    // Served read-only, as it is.
    let s =
        crate::common::Server::start_with(&root, &["--embedding-model", model.to_str().unwrap()])
            .await;
    let info = s
        .eventually(300, "vault_info", serde_json::json!({}), |i| {
            i["embedding"]["state"] == "ready"
        })
        .await;
    assert_eq!(info["embedding"]["dimensions"], 384, "{info}");
    assert_eq!(info["embedding"]["embedded"], info["notes"], "{info}");
    let queries: Vec<Labelled> = labelled()
        .into_iter()
        .filter(|l| l.vault == "kepano-obsidian" && l.kind == "paraphrase")
        .collect();
    let mut found = 0;
    for q in &queries {
        let r = s
            .ok(
                "search_notes",
                serde_json::json!({"query": q.query, "mode": "semantic", "limit": 5}),
            )
            .await;
        let hit = r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| q.expect.iter().any(|e| h["path"] == e.as_str()));
        found += usize::from(hit);
    }
    eprintln!(
        "transformer, kepano-obsidian: {found} of {} paraphrases in the top 5",
        queries.len()
    );
    // 15 of 18 when measured; static models find far fewer.
    assert!(
        found * 3 >= queries.len() * 2,
        "{found} of {}",
        queries.len()
    );
    s.stop().await;
}

/// A transformer on a vault of more than 10,000 notes: the server warns that embedding will take
/// long and points to `capvault model import`, and keyword search serves meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transformer_on_a_large_vault_warns_and_keyword_search_serves() {
    let Some(model) = crate::common::transformer_dir("semantic quality") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<(String, String)> = (0..10_001)
        .map(|i| {
            (
                format!("F{}/Note {i}.md", i / 1000),
                format!("A short note, number {i}, about tomatoes.\n"),
            )
        })
        .collect();
    crate::common::write_tree(tmp.path(), &files);
    let s = crate::common::Server::start_http(
        tmp.path(),
        &[
            "--embedding-model",
            model.to_str().unwrap(),
            "--no-index-cache",
        ],
    )
    .await;
    let hits = s
        .eventually(
            120,
            "search_notes",
            serde_json::json!({"query": "tomatoes 4321", "mode": "ranked"}),
            |r| r["hits"].as_array().is_some_and(|h| !h.is_empty()),
        )
        .await;
    assert_eq!(hits["hits"][0]["path"], "F4/Note 4321.md", "{hits}");
    let stderr = &s.http.as_ref().unwrap().stderr;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let warned = stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("WARN") && l.contains("capvault model import"));
        if warned {
            break;
        }
        assert!(
            Instant::now() < until,
            "no warning: {:?}",
            stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.stop().await;
}

/// The notes of a vault folder: (vault path, text), hidden folders left out.
fn vault_notes(root: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                todo.push(path);
            } else if kind.is_file() && name.ends_with(".md") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                out.push((rel, text));
            }
        }
    }
    out.sort();
    out
}

/// The static model against the transformer it was distilled from, on the same sections
/// (cut and cleaned as the server cuts them) and the same note scoring (the mean of the best
/// section's cosine and the sections' average): semantic recall@5 and MRR per query kind.
/// Minutes in a release build (the transformer embeds tens of sections a second), so it is
/// run by hand: `CAPVAULT_EMBEDDING_MODEL=STATIC_DIR CAPVAULT_TRANSFORMER_MODEL=ST_DIR cargo
/// test --release --test integration semantic_quality:: -- --ignored --nocapture`, where ST_DIR is the
/// sentence-transformers folder the static model was imported from.
#[test]
#[ignore = "minutes of transformer inference; run by hand (see the doc comment)"]
fn the_static_model_against_its_transformer() {
    use capvault::semantic::chunk;
    let model = capvault::semantic::load_model(
        &capvault::vault::host::Host::claim(),
        &model_dir().expect("CAPVAULT_EMBEDDING_MODEL"),
    )
    .unwrap();
    let transformer = capvault::semantic::import::Transformer::load(
        &capvault::vault::host::Host::claim(),
        &PathBuf::from(
            std::env::var_os("CAPVAULT_TRANSFORMER_MODEL").expect("CAPVAULT_TRANSFORMER_MODEL"),
        ),
    )
    .unwrap();
    let labelled = labelled();
    let vaults = by_vault(&labelled);
    // (model, kind) → score.
    let mut scores: BTreeMap<(&str, &str), Score> = BTreeMap::new();
    for (name, queries) in vaults {
        let Some(root) = crate::common::shared_vault(name) else {
            return;
        };
        let notes = vault_notes(&root);
        let stem = |p: &str| {
            let file = p.rsplit('/').next().unwrap_or(p);
            file.strip_suffix(".md").unwrap_or(file).to_owned()
        };
        let mut counts: std::collections::HashMap<u64, u32> = Default::default();
        for (p, t) in &notes {
            for k in chunk::line_keys(&stem(p), t) {
                *counts.entry(k).or_default() += 1;
            }
        }
        let boilerplate = chunk::boilerplate(counts, notes.len());
        // (note, section texts)
        let sections: Vec<(&str, Vec<String>)> = notes
            .iter()
            .map(|(p, t)| {
                let texts = chunk::chunks_without(&stem(p), t, &boilerplate)
                    .into_iter()
                    .map(|c| c.text)
                    .collect();
                (p.as_str(), texts)
            })
            .collect();
        let all: Vec<&str> = sections
            .iter()
            .flat_map(|(_, t)| t.iter().map(String::as_str))
            .collect();
        let started = Instant::now();
        let static_vectors: Vec<Vec<f32>> = all
            .iter()
            .map(|t| {
                model
                    .embed(t)
                    .unwrap_or_else(|| vec![0.0; model.dimensions()])
            })
            .collect();
        let mut transformer_vectors = Vec::with_capacity(all.len());
        for (i, batch) in all.chunks(512).enumerate() {
            transformer_vectors.extend(transformer.embed(batch).unwrap());
            eprintln!(
                "{name}: {} of {} sections through the transformer, {:.0} s",
                (i * 512 + batch.len()),
                all.len(),
                started.elapsed().as_secs_f64()
            );
        }
        for (model_name, vectors) in [
            ("static", &static_vectors),
            ("transformer", &transformer_vectors),
        ] {
            for q in &queries {
                let query = if model_name == "static" {
                    model.embed(&q.query).unwrap()
                } else {
                    transformer.embed(&[q.query.as_str()]).unwrap().remove(0)
                };
                let mut at = 0;
                let mut ranked: Vec<(f32, &str)> = sections
                    .iter()
                    .map(|(p, texts)| {
                        let cos: Vec<f32> = vectors[at..at + texts.len()]
                            .iter()
                            .map(|v| v.iter().zip(&query).map(|(a, b)| a * b).sum())
                            .collect();
                        at += texts.len();
                        let best = cos.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let mean = cos.iter().sum::<f32>() / cos.len().max(1) as f32;
                        ((best + mean) / 2.0, *p)
                    })
                    .collect();
                ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
                let rank = ranked
                    .iter()
                    .take(20)
                    .position(|(_, p)| q.expect.iter().any(|e| e == p));
                tally(
                    scores.entry((model_name, q.kind.as_str())).or_default(),
                    rank,
                );
            }
        }
    }
    println!("\nsemantic mode  kind        queries  recall@5   MRR");
    for ((m, kind), s) in &scores {
        println!(
            "{m:<14} {kind:<11} {:>7}  {:>7.1}%  {:.3}",
            s.2,
            100.0 * s.0 as f64 / s.2.max(1) as f64,
            s.1 / s.2.max(1) as f64
        );
    }
}
