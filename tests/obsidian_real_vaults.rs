//! Every settings file, canvas and note (for Dataview) in the shared real vaults
//! (`../shared/vaults`) must parse.
//! The folder is optional on a developer's machine (the tests say they skipped); CI sets
//! `CAPVAULT_REQUIRE_SHARED_VAULTS=1`, which makes its absence a failure.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

use capvault::obsidian::{canvas, config, dataview, moment};

const VAULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/vaults");

/// Every file under `dir` (symlinks not followed), sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// The shared vaults, if present. Under `CAPVAULT_REQUIRE_SHARED_VAULTS=1` (set by CI) their
/// absence fails the test instead of skipping it.
fn vaults_root() -> Option<PathBuf> {
    let root = PathBuf::from(VAULTS);
    let present = std::fs::metadata(&root).is_ok();
    assert!(
        present || std::env::var_os("CAPVAULT_REQUIRE_SHARED_VAULTS").is_none_or(|v| v != "1"),
        "{VAULTS} is absent and CAPVAULT_REQUIRE_SHARED_VAULTS=1"
    );
    present.then_some(root)
}

#[test]
fn every_config_file_in_the_shared_vaults_parses() {
    let Some(root) = vaults_root() else {
        eprintln!("skipped: {VAULTS} is absent");
        return;
    };
    let mut checked = 0;
    for path in files_under(&root) {
        let text = path.to_string_lossy().replace('\\', "/");
        let Some((_, inside)) = text.split_once("/.obsidian/") else {
            continue;
        };
        let bytes = std::fs::read(&path).unwrap();
        let result = match inside {
            "app.json" => config::parse_app(&bytes).map(|_| ()),
            "daily-notes.json" => config::parse_daily_notes(&bytes).map(|_| ()),
            "templates.json" => config::parse_templates(&bytes).map(|_| ()),
            "community-plugins.json" => config::parse_enabled_plugins(&bytes).map(|_| ()),
            "core-plugins.json" => config::parse_core_plugins(&bytes).map(|_| ()),
            "plugins/periodic-notes/data.json" => config::parse_periodic_notes(&bytes).map(|_| ()),
            _ => continue,
        };
        assert!(result.is_ok(), "{text}: {result:?}");
        checked += 1;
    }
    eprintln!("{checked} settings files parsed");
}

#[test]
fn every_canvas_in_the_shared_vaults_parses() {
    let Some(root) = vaults_root() else {
        eprintln!("skipped: {VAULTS} is absent");
        return;
    };
    let mut checked = 0;
    for path in files_under(&root) {
        if path.extension().is_none_or(|e| e != "canvas") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let parsed = canvas::parse_canvas(&bytes);
        let c = parsed.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Canvases written by Obsidian are valid: any issue is a bug in the validator or a
        // real defect worth seeing.
        assert!(c.issues.is_empty(), "{}: {:#?}", path.display(), c.issues);
        checked += 1;
    }
    eprintln!("{checked} canvases parsed");
}

#[test]
fn kepano_vault_daily_notes_resolve_to_its_daily_folder() {
    let Some(root) = vaults_root() else {
        eprintln!("skipped: {VAULTS} is absent");
        return;
    };
    let vault = root.join("kepano-obsidian");
    let Ok(daily_json) = std::fs::read(vault.join(".obsidian/daily-notes.json")) else {
        eprintln!("skipped: kepano-obsidian has no daily-notes.json");
        return;
    };
    let daily = config::parse_daily_notes(&daily_json).unwrap();
    assert_eq!(daily.folder, "Daily");
    assert_eq!(
        daily.format, "YYYY-MM-DD",
        "the file has no format: the default applies"
    );
    assert_eq!(daily.template, "Templates/Daily Note Template");

    let core = config::parse_core_plugins(
        &std::fs::read(vault.join(".obsidian/core-plugins.json")).unwrap(),
    )
    .unwrap();
    assert!(core.is_enabled("daily-notes") && core.is_enabled("templates"));
    assert!(!core.is_enabled("properties"));

    let cfg = config::daily_note_location(&[], None, Some(&daily));
    assert_eq!(cfg.source, config::DailyNoteSource::DailyNotes);
    let date = chrono::NaiveDate::from_ymd_opt(2023, 9, 12).unwrap();
    let path = moment::daily_note_path(&cfg.folder, &cfg.format, date).unwrap();
    assert_eq!(path, "Daily/2023-09-12.md");
    assert!(
        std::fs::metadata(vault.join(&path)).is_ok(),
        "{path} exists in the vault"
    );

    // Every note in Daily/ is recognised as a daily note by its name.
    for note in files_under(&vault.join("Daily")) {
        let name = note.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            moment::daily_note_date(&cfg.format, &name).is_some(),
            "{name} is not recognised"
        );
    }

    let templates =
        config::parse_templates(&std::fs::read(vault.join(".obsidian/templates.json")).unwrap())
            .unwrap();
    assert_eq!(templates.folder, "Templates");
    assert_eq!(templates.date_format, "YYYY-MM-DD");
    assert_eq!(templates.time_format, "HH:mm");

    let app = config::parse_app(&std::fs::read(vault.join(".obsidian/app.json")).unwrap()).unwrap();
    assert_eq!(app.attachment_folder_path, "Attachments");
    assert!(app.always_update_links);
    assert_eq!(app.new_link_format, config::NewLinkFormat::Shortest);
}

/// The Dataview parser over every note: no panic, every line inside its note, counts printed.
#[test]
fn every_note_of_the_shared_vaults_parses_for_dataview() {
    let Some(root) = vaults_root() else {
        eprintln!("skipped: {VAULTS} is absent");
        return;
    };
    let (mut notes, mut fields, mut emoji, mut items, mut tasks, mut done) = (0, 0, 0, 0, 0, 0);
    for path in files_under(&root)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let lines = text.split('\n').count();
        let note = dataview::parse_note(&text);
        notes += 1;
        let all = note
            .fields
            .iter()
            .chain(note.items.iter().flat_map(|i| &i.fields));
        for f in all {
            assert!(f.line < lines, "{}: {f:?}", path.display());
            fields += 1;
            emoji += usize::from(f.syntax == dataview::FieldSyntax::Emoji);
        }
        for item in &note.items {
            assert!(
                item.line + item.line_count <= lines,
                "{}: {item:?}",
                path.display()
            );
            items += 1;
            if let Some(t) = item.task {
                tasks += 1;
                done += usize::from(t.completed);
            }
        }
    }
    eprintln!(
        "{notes} notes: {fields} inline fields ({emoji} emoji shorthands), {items} list items, {tasks} tasks ({done} completed)"
    );
    assert!(notes > 0);
}
