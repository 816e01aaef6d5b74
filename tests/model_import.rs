//! `capvault model import --corpus VAULT`, run as a user runs it, with the real transformer CI
//! imports from (`CAPVAULT_TRANSFORMER_MODEL`; CI sets `CAPVAULT_REQUIRE_MODEL=1`): the model is
//! tuned on the vault's notes, read through the capability layer (hidden folders and symlinks
//! leaving the vault are not read), written readable by its owner only, and it loads. A corpus
//! that is not a vault fails at once, before the minutes of the transformer.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

fn import(source: &Path, out: &Path, corpus: &Path) -> Output {
    crate::common::capvault()
        .args(["model", "import"])
        .arg(source)
        .arg("--out")
        .arg(out)
        .arg("--corpus")
        .arg(corpus)
        .args(["--dimensions", "64"])
        .output()
        .expect("run capvault")
}

/// Notes on a few topics, each a heading-less single section.
fn write_corpus(root: &Path) {
    let topics = [
        (
            "Garden",
            "Tomatoes want full sun and deep watering twice a week in summer.",
        ),
        (
            "Bread",
            "Sourdough needs a lively starter, a long cold proof and a very hot oven.",
        ),
        (
            "Bikes",
            "Oil the chain after riding in the rain and check the tyre pressure monthly.",
        ),
        (
            "Taxes",
            "Keep every receipt for deductible expenses until the filing deadline in April.",
        ),
        (
            "Sleep",
            "A dark cool bedroom and no screens late at night help me fall asleep sooner.",
        ),
        (
            "Piano",
            "Practise scales slowly with a metronome before playing the sonata at tempo.",
        ),
    ];
    let mut files: Vec<(String, String)> = Vec::new();
    for (name, text) in topics {
        for i in 0..4 {
            files.push((
                format!("{name}/{name} {i}.md"),
                format!("{text} Day {i}.\n"),
            ));
        }
    }
    crate::common::write_tree(root, &files);
}

#[test]
fn an_import_tuned_on_a_vault_fits_the_transformer_better_and_stays_private() {
    let Some(source) = crate::common::transformer_dir("model import") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    write_corpus(&vault);
    // Neither a hidden folder nor a symlink out of the vault is read.
    crate::common::write_tree(
        &vault,
        &[(
            ".hidden/Secret.md",
            "hidden xylophonic words xylophonic xylophonic must not be read",
        )],
    );
    crate::common::write_tree(
        tmp.path(),
        &[(
            "outside/Leak.md",
            "leavened leavened leavened words outside the vault",
        )],
    );
    crate::common::symlink(&vault, "Leak.md", tmp.path().join("outside/Leak.md"));
    crate::common::symlink(&vault, "Outside", tmp.path().join("outside"));
    let out = tmp.path().join("model");
    let run = import(&source, &out, &vault);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("Tuned on 24 sections"), "{stdout}");
    // The hint a plain import prints (CI's own import checks it is there) is not given here.
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.contains("without --corpus"), "{stderr}");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    let tuned = &config["tuned"];
    assert_eq!(tuned["sections"], 24, "{config}");
    let (before, after) = (
        tuned["held_out_cosine_before"].as_f64().unwrap(),
        tuned["held_out_cosine_after"].as_f64().unwrap(),
    );
    eprintln!("held-out agreement with the transformer: {before:.3} -> {after:.3}");
    assert!(after > before + 0.05, "{before} -> {after}");
    // Words the tokenizer splits, used at least three times, join the vocabulary whole:
    // "sourdough" (four notes) does; words of the hidden note and of the notes outside do not.
    let tokenizer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tokenizer.json")).unwrap()).unwrap();
    let vocab = tokenizer["model"]["vocab"].as_object().unwrap();
    assert!(vocab.contains_key("sourdough"), "{:?}", vocab.len());
    assert!(
        !vocab.contains_key("xylophonic") && !vocab.contains_key("leavened"),
        "a hidden or outside note's word was added"
    );
    assert!(tuned["words_added"].as_u64().unwrap() >= 1, "{config}");
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        let mode = std::fs::metadata(out.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    let model =
        capvault::semantic::load_model(&capvault::vault::host::Host::claim(), &out).unwrap();
    assert_eq!(model.info().dimensions, 64);
    let garden = model.embed("watering tomatoes in the sun").unwrap();
    let bread = model.embed("a hot oven for sourdough").unwrap();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let note = model
        .embed("Garden 0\nTomatoes want full sun and deep watering twice a week in summer.")
        .unwrap();
    assert!(dot(&garden, &note) > dot(&bread, &note));
}

#[test]
fn a_corpus_that_is_not_a_vault_fails_before_the_transformer_runs() {
    let Some(source) = crate::common::transformer_dir("model import") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("model");
    for (corpus, says) in [
        (tmp.path().join("missing"), "corpus"),
        (tmp.path().to_path_buf(), "has no notes"),
    ] {
        let run = import(&source, &out, &corpus);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success());
        assert!(stderr.contains(says), "{stderr}");
        // Nothing ran: no progress line, no model.
        assert!(!stderr.contains("tokens"), "{stderr}");
        assert!(!out.exists());
    }
}
