//! Exact search on the wire, by query class: a raw JSON-RPC pipe to the release binary (no
//! SDK) sends `search_notes mode=exact limit=10` for queries drawn from the vault itself, and
//! prints p50 and p95 per class (single words by how many notes hold them, phrases of two and
//! three words, case-sensitive phrases, phrases in a folder, common words with a tag filter),
//! then, outside that mix, common words and phrases asking for the first page alone
//! (`estimate`).
//!
//! Run: `cargo bench --bench exact` (a generated vault of 10,000 notes),
//! `CAPVAULT_BENCH_NOTES=100000 cargo bench --bench exact`, or
//! `CAPVAULT_BENCH_VAULT=path/to/vault cargo bench --bench exact` (any vault; the queries come
//! from its notes). Options: `CAPVAULT_BENCH_RUNS=N` timed calls per query after one untimed
//! (default 7), `CAPVAULT_BENCH_QUERIES=N` queries per class (default 6), `CAPVAULT_BIN` (another
//! binary, to compare builds on the same queries: they depend only on the vault and the seed).
//! Prints figures; asserts nothing about time.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/pipe.rs"]
mod pipe;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use pipe::{env_usize, p50_p95, spawn};

/// One note of the vault as the benchmark sees it.
struct Note {
    /// Its top folder ("" at the root).
    folder: String,
    text: String,
}

fn notes_under(root: &Path) -> Vec<Note> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(path);
            } else if name.ends_with(".md")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                let rel = path.strip_prefix(root).unwrap();
                let folder = match rel.components().count() {
                    1 => String::new(),
                    _ => rel
                        .components()
                        .next()
                        .unwrap()
                        .as_os_str()
                        .to_string_lossy()
                        .into_owned(),
                };
                out.push(Note { folder, text });
            }
        }
    }
    out
}

/// Lower-cased ASCII words of three letters or more.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 3)
        .map(|w| w.to_ascii_lowercase())
}

/// A run of `n` words from one line of a random note, separated by single spaces, as written
/// (case kept): a phrase someone would search for. With its note's folder.
fn phrase(rng: &mut StdRng, notes: &[Note], n: usize) -> Option<(String, String)> {
    for _ in 0..200 {
        let note = notes.choose(rng)?;
        let lines: Vec<&str> = note
            .text
            .lines()
            .filter(|l| !l.starts_with("---") && l.len() > 20)
            .collect();
        let Some(line) = lines.choose(rng) else {
            continue;
        };
        let toks: Vec<&str> = line.split(' ').collect();
        if toks.len() < n {
            continue;
        }
        let at = rng.random_range(0..=toks.len() - n);
        let run = &toks[at..at + n];
        if run
            .iter()
            .all(|w| w.len() >= 3 && w.bytes().all(|b| b.is_ascii_alphabetic()))
        {
            return Some((run.join(" "), note.folder.clone()));
        }
    }
    None
}

fn main() {
    let runs = env_usize("CAPVAULT_BENCH_RUNS", 7);
    let per_class = env_usize("CAPVAULT_BENCH_QUERIES", 6);
    let (root, label) = match std::env::var("CAPVAULT_BENCH_VAULT") {
        Ok(v) => (PathBuf::from(&v), v),
        Err(_) => {
            let notes = env_usize("CAPVAULT_BENCH_NOTES", 10_000);
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
            let g = generator::generate(&dir, notes, 42);
            (g.root, "synthetic, seed 42".to_owned())
        }
    };
    let notes = notes_under(&root);
    let bytes: usize = notes.iter().map(|n| n.text.len()).sum();
    println!(
        "exact search by query class: {label}, {} notes, {:.1} MB",
        notes.len(),
        bytes as f64 / 1e6
    );

    // How many notes hold each word (as a substring of a word, as exact search finds it, is
    // close enough to choose words by frequency).
    let mut df: HashMap<String, usize> = HashMap::new();
    for n in &notes {
        let seen: HashSet<String> = words(&n.text).collect();
        for w in seen {
            *df.entry(w).or_default() += 1;
        }
    }
    let total = notes.len() as f64;
    let mut rng = StdRng::seed_from_u64(41);
    let mut by_share = |lo: f64, hi: f64| -> Vec<String> {
        let mut fit: Vec<&String> = df
            .iter()
            .filter(|(_, c)| (**c as f64) / total >= lo && (**c as f64) / total < hi)
            .map(|(w, _)| w)
            .collect();
        fit.sort();
        fit.choose_multiple(&mut rng, per_class)
            .map(|w| w.to_string())
            .collect()
    };
    let rare = by_share(0.0, 0.001);
    let uncommon = by_share(0.001, 0.03);
    let common = by_share(0.03, 0.2);
    let frequent = by_share(0.2, 1.01);
    let mut rng = StdRng::seed_from_u64(42);
    let mut phrases = |n: usize| -> Vec<(String, String)> {
        (0..per_class)
            .filter_map(|_| phrase(&mut rng, &notes, n))
            .collect()
    };
    let two = phrases(2);
    let three = phrases(3);
    let cased = phrases(2);
    let foldered = phrases(2);

    let bin =
        std::env::var("CAPVAULT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_capvault").into());
    // As users run it: with an index cache folder, where the notes' texts are kept in a file
    // (CAPVAULT_BENCH_NO_CACHE=1: without one, the texts in memory).
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-cache");
    let cache_arg = cache.to_string_lossy().into_owned();
    let args: Vec<&str> = if std::env::var_os("CAPVAULT_BENCH_NO_CACHE").is_some() {
        vec!["--no-index-cache"]
    } else {
        vec!["--index-cache", &cache_arg]
    };
    println!("server: {bin} {}", args.join(" "));
    let mut pipe = spawn(&bin, &root, &args);
    loop {
        let info = pipe.call("vault_info", &json!({}));
        if info["index"]["state"] == "ready" && !info["notes"].is_null() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the merges and the text cache the first build leaves finish before timing.
    std::thread::sleep(Duration::from_secs(if notes.len() >= 50_000 {
        25
    } else {
        4
    }));
    let tag = pipe.call("list_tags", &json!({"limit": 1}))["items"][0]["tag"]
        .as_str()
        .unwrap_or("x")
        .to_owned();

    let q = |query: &str| json!({"query": query, "mode": "exact", "limit": 10});
    let mut classes: BTreeMap<usize, (String, Vec<Value>)> = BTreeMap::new();
    let mut add = |i: usize, name: &str, args: Vec<Value>| {
        classes.insert(i, (name.to_owned(), args));
    };
    add(
        0,
        "word in <0.1% of notes",
        rare.iter().map(|w| q(w)).collect(),
    );
    add(1, "word in 0.1-3%", uncommon.iter().map(|w| q(w)).collect());
    add(2, "word in 3-20%", common.iter().map(|w| q(w)).collect());
    add(3, "word in >20%", frequent.iter().map(|w| q(w)).collect());
    add(
        4,
        "two-word phrase",
        two.iter().map(|(p, _)| q(p)).collect(),
    );
    add(
        5,
        "three-word phrase",
        three.iter().map(|(p, _)| q(p)).collect(),
    );
    add(
        6,
        "phrase, case-sensitive",
        cased
            .iter()
            .map(|(p, _)| {
                let mut a = q(p);
                a["case_sensitive"] = json!(true);
                a
            })
            .collect(),
    );
    add(
        7,
        "phrase in its folder",
        foldered
            .iter()
            .map(|(p, f)| {
                let mut a = q(p);
                if !f.is_empty() {
                    a["folder"] = json!(f);
                }
                a
            })
            .collect(),
    );
    add(
        8,
        &format!("word in 3-20%, tag #{tag}"),
        common
            .iter()
            .map(|w| {
                let mut a = q(w);
                a["tag"] = json!(tag);
                a
            })
            .collect(),
    );
    // Not in "all classes": the same common words and phrases, asking for the first page
    // before the total (`estimate`), which the mix above never does.
    let estimated = |a: &Value| {
        let mut a = a.clone();
        a["estimate"] = json!(true);
        a
    };
    add(
        100,
        "word in 3-20%, estimate",
        common.iter().map(|w| estimated(&q(w))).collect(),
    );
    add(
        101,
        "two-word phrase, estimate",
        two.iter().map(|(p, _)| estimated(&q(p))).collect(),
    );

    println!(
        "{:<34} {:>3} {:>9} {:>9} {:>9}  queries (hits in all; ~ estimated)",
        "class", "n", "p50 ms", "p95 ms", "max ms"
    );
    let mut all = Vec::new();
    let mut in_mix = true;
    for (&i, (name, cases)) in &classes {
        if i >= 100 && in_mix {
            in_mix = false;
            let (p50, p95) = p50_p95(std::mem::take(&mut all));
            println!("{:<34} {:>3} {p50:>9.2} {p95:>9.2}", "all classes", "");
        }
        let mut times = Vec::new();
        let mut shown = Vec::new();
        for args in cases {
            let r = pipe.call("search_notes", args);
            let est = if r["total_estimated"] == true {
                "~"
            } else {
                ""
            };
            shown.push(format!(
                "{} ({est}{})",
                args["query"].as_str().unwrap(),
                r["total"]
            ));
            for _ in 0..runs {
                let t = Instant::now();
                pipe.call("search_notes", args);
                times.push(t.elapsed());
            }
        }
        if times.is_empty() {
            continue;
        }
        if in_mix {
            all.extend(times.iter().copied());
        }
        let max = times.iter().max().unwrap().as_secs_f64() * 1e3;
        let (p50, p95) = p50_p95(times);
        println!(
            "{name:<34} {:>3} {p50:>9.2} {p95:>9.2} {max:>9.2}  {}",
            cases.len(),
            shown.join(", ")
        );
    }
    if in_mix {
        let (p50, p95) = p50_p95(all);
        println!("{:<34} {:>3} {p50:>9.2} {p95:>9.2}", "all classes", "");
    }
    drop(pipe.stdin);
    let _ = pipe.child.wait();
}
