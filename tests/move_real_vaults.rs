//! `move_note` on copies of both shared real vaults: the most-linked note and a folder are
//! moved through the real binary; then every link of the vault still resolves where it did
//! (to the moved files at their new paths), no link text changed except those of rewritten
//! links, and no other byte of any file changed. Resolution before and after is read from the
//! library's own model, built on the vault as it is on disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::common::{Server, copy_tree, shared_vault, snapshot};
use capvault::engine::{Engine, EngineOptions, IndexCache};
use capvault::markdown::parse_note;
use capvault::model::Target;
use capvault::vault::{Limits, Vault, VaultPath};
use serde_json::json;

/// Every link of every note: (note, link number) → the file it resolves to (`None`: broken),
/// and its kind, subpath and display text.
type Links = BTreeMap<(String, usize), (Option<String>, String)>;

fn model_links(root: &Path) -> (Links, HashMap<String, usize>) {
    let vault = Vault::open(root, Limits::default()).unwrap();
    let engine: Arc<Engine> = Engine::open(
        vault,
        EngineOptions {
            watch: false,
            ..EngineOptions::default()
        },
        IndexCache::Off,
    );
    engine.ensure_built();
    let model = engine.model().unwrap();
    let mut links = Links::new();
    let mut backlinks: HashMap<String, usize> = HashMap::new();
    for (path, note) in model.notes() {
        for (i, (t, l)) in model.targets(note).zip(&note.parsed.links).enumerate() {
            let to = match t {
                Target::File { path, .. } => Some(path.to_string()),
                Target::Broken => None,
            };
            if let Some(to) = &to {
                *backlinks.entry(to.clone()).or_default() += 1;
            }
            let rest = format!("{:?} {:?} {:?}", l.kind, l.subpath(), l.display());
            links.insert((path.to_string(), i), (to, rest));
        }
    }
    drop(model);
    engine.shutdown();
    (links, backlinks)
}

/// The text of a note with its links cut out: what must not change when only links do.
fn without_links(text: &str) -> Vec<String> {
    let parsed = parse_note(text);
    let mut out = Vec::new();
    let mut at = 0;
    for l in &parsed.links {
        let r = l.pos.range();
        if r.start >= at {
            out.push(text[at..r.start].to_owned());
            at = r.end;
        }
    }
    out.push(text[at..].to_owned());
    out
}

async fn check_moves_on(name: &str) {
    let Some(src) = shared_vault(name) else {
        eprintln!("skipped: ../shared/vaults/{name} is absent");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(name);
    copy_tree(&src, &root);
    let (before, backlinks) = model_links(&root);
    let mut ranked: Vec<(&String, &usize)> = backlinks
        .iter()
        .filter(|(p, _)| p.ends_with(".md"))
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let note = ranked[0].0.clone();
    // The folder of the most-linked note in a folder (not the moved note's own folder).
    let folder = ranked
        .iter()
        .filter_map(|(p, _)| p.rsplit_once('/').map(|(f, _)| f.to_owned()))
        .find(|f| !note.starts_with(&format!("{f}/")))
        .expect("a linked note in a folder");
    let files_before: BTreeMap<String, Vec<u8>> = snapshot(&root)
        .into_iter()
        .map(|(p, b)| {
            (
                p.strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
                b,
            )
        })
        .collect();

    let state = tmp.path().join("state");
    let s = Server::start_with(
        &root,
        &[
            "--write",
            "--no-index-cache",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    )
    .await;
    s.wait_index_ready().await;
    // Renamed as well as moved: every link to it must be rewritten.
    let stem = note.rsplit('/').next().unwrap().trim_end_matches(".md");
    let note_to = format!("Moved Here/{stem} (moved).md");
    let folder_to = format!("Relocated/{}", folder.rsplit('/').next().unwrap());
    let r1 = s
        .ok("move_note", json!({"from": note, "to": note_to}))
        .await;
    let r2 = s
        .ok("move_note", json!({"from": folder, "to": folder_to}))
        .await;
    for r in [&r1, &r2] {
        for c in r["changed"].as_array().unwrap() {
            assert!(c["error"].is_null(), "{name}: a rewrite failed: {c}");
        }
    }
    assert!(
        r1["links_updated"].as_u64().unwrap() >= *ranked[0].1 as u64,
        "{name}: fewer links rewritten than point at the renamed note: {r1}"
    );
    s.stop().await;

    // Where every old path is now.
    let moved = |p: &str| -> String {
        let p = if p == note {
            note_to.clone()
        } else {
            p.to_owned()
        };
        match p.strip_prefix(&format!("{folder}/")) {
            Some(rest) => format!("{folder_to}/{rest}"),
            None => p,
        }
    };
    let (after, _) = model_links(&root);
    assert_eq!(
        before.len(),
        after.len(),
        "{name}: the number of links changed"
    );
    let mut checked = 0;
    for ((source, i), (target, rest)) in &before {
        let now = after
            .get(&(moved(source), *i))
            .unwrap_or_else(|| panic!("{name}: link {i} of {source} is gone"));
        let want = target.as_deref().map(moved);
        assert_eq!(
            now.0.as_deref(),
            want.as_deref(),
            "{name}: link {i} of {source} resolves elsewhere after the moves"
        );
        assert_eq!(
            &now.1, rest,
            "{name}: link {i} of {source} lost its subpath or text"
        );
        checked += 1;
    }
    assert!(checked > 50, "{name}: only {checked} links");

    // Every file is where the moves put it, byte for byte, except for rewritten link texts.
    let files_after: BTreeMap<String, Vec<u8>> = snapshot(&root)
        .into_iter()
        .map(|(p, b)| {
            (
                p.strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
                b,
            )
        })
        .filter(|(p, _)| !p.starts_with(".trash"))
        .collect();
    let mut expected_paths: Vec<String> = files_before.keys().map(|p| moved(p)).collect();
    expected_paths.sort();
    let got_paths: Vec<String> = files_after.keys().cloned().collect();
    assert_eq!(
        got_paths, expected_paths,
        "{name}: files appeared or vanished"
    );
    let mut rewritten = 0;
    for (old, bytes) in &files_before {
        let new = &files_after[&moved(old)];
        if new == bytes {
            continue;
        }
        rewritten += 1;
        let (a, b) = (
            String::from_utf8_lossy(bytes).into_owned(),
            String::from_utf8_lossy(new).into_owned(),
        );
        if old.ends_with(".md") {
            assert_eq!(
                without_links(&a),
                without_links(&b),
                "{name}: {old} changed outside its links"
            );
        } else {
            assert!(old.ends_with(".canvas"), "{name}: {old} changed");
        }
    }
    assert!(rewritten > 0, "{name}: no file was rewritten");
    let _ = VaultPath::root();
}

#[tokio::test]
async fn moving_the_most_linked_note_and_a_folder_keeps_every_link_of_kepano_obsidian() {
    check_moves_on("kepano-obsidian").await;
}

#[tokio::test]
async fn moving_the_most_linked_note_and_a_folder_keeps_every_link_of_obsidian_hub() {
    check_moves_on("obsidian-hub").await;
}
