//! Search quality on real notes: the labelled queries of `tests/quality/queries.jsonl` (on
//! ../shared/vaults: paraphrases that share no content word with the note they should find,
//! checked by `tests/quality/check.py`, and ordinary keyword queries), run in `ranked`,
//! `semantic` and `hybrid` modes with a real static model (`CAPVAULT_EMBEDDING_MODEL`, a folder
//! made by `capvault model import`; CI sets it and `CAPVAULT_REQUIRE_MODEL=1`). Prints recall@5
//! and MRR per mode and kind. The target for hybrid is 20 points of recall@5 above
//! ranked on paraphrases; today's model reaches less (docs/performance.md), so this test holds
//! the floor it does reach: hybrid at least 10 points above ranked on paraphrases, and within 2
//! points of ranked on keyword queries.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capvault::engine::{Engine, Freshness, IndexCache};
use capvault::notes::search::{Mode, SearchQuery, search};
use capvault::vault::{Limits, Vault, VaultPath};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Labelled {
    vault: String,
    kind: String,
    query: String,
    expect: Vec<String>,
}

/// The model folder, or `None` (and a note) when it is not configured and not required.
fn model_dir() -> Option<PathBuf> {
    match std::env::var_os("CAPVAULT_EMBEDDING_MODEL") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                std::env::var_os("CAPVAULT_REQUIRE_MODEL").is_none_or(|v| v != "1"),
                "CAPVAULT_REQUIRE_MODEL=1 but CAPVAULT_EMBEDDING_MODEL is not set"
            );
            eprintln!("semantic quality: no CAPVAULT_EMBEDDING_MODEL, not measured");
            None
        }
    }
}

fn engine_for(root: &std::path::Path, model: &std::path::Path) -> Arc<Engine> {
    let vault = Vault::open(root, Limits::default()).unwrap();
    let engine = Engine::open(
        vault,
        Freshness {
            watch: false,
            ..Freshness::default()
        },
        IndexCache::Off,
    );
    engine.set_embedding_model(capvault::semantic::load_model(model).unwrap());
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

#[test]
fn hybrid_search_finds_paraphrased_notes_that_ranked_search_misses() {
    let Some(model) = model_dir() else { return };
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/quality/queries.jsonl"),
    )
    .unwrap();
    let labelled: Vec<Labelled> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut vaults: BTreeMap<&str, Vec<&Labelled>> = BTreeMap::new();
    for l in &labelled {
        vaults.entry(l.vault.as_str()).or_default().push(l);
    }
    // (mode, kind) → score.
    let mut scores: BTreeMap<(&str, &str), Score> = BTreeMap::new();
    let modes = [
        ("ranked", Mode::Ranked),
        ("semantic", Mode::Semantic),
        ("hybrid", Mode::Hybrid),
    ];
    for (name, queries) in vaults {
        let Some(root) = common::shared_vault(name) else {
            return;
        };
        let started = Instant::now();
        let engine = engine_for(&root, &model);
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
                let r = search(
                    &engine,
                    &SearchQuery {
                        query: q.query.clone(),
                        mode,
                        limit: Some(20),
                        case_sensitive: false,
                        folder: VaultPath::root(),
                        tag: None,
                        property: None,
                        value: None,
                        modified_after: None,
                        modified_before: None,
                        cursor: None,
                    },
                )
                .unwrap();
                let rank = r.hits.iter().position(|h| q.expect.contains(&h.path));
                let s = scores.entry((mode_name, q.kind.as_str())).or_default();
                s.2 += 1;
                if let Some(i) = rank {
                    s.1 += 1.0 / (i as f64 + 1.0);
                    if i < 5 {
                        s.0 += 1;
                    }
                }
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
    let get = |m: &str, k: &str| scores[&(m, k)];
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
