//! Test-only module (declared under `#[cfg(test)]`): the write primitive on real temporary trees.
//! Each attack asserts that nothing outside the vault or in a hidden folder was created or
//! changed, and that no temporary file is left behind.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::Path;

use super::{Exclusions, Expect, Limits, Vault, VaultError, VaultPath, sha256_hex};

/// A vault folder `v` with `outside/` beside it, and the vault opened on `v`.
fn setup() -> (tempfile::TempDir, Vault) {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("v");
    std::fs::create_dir_all(v.join("Notes")).unwrap();
    std::fs::create_dir_all(v.join(".obsidian")).unwrap();
    std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
    std::fs::write(v.join("Notes/a.md"), "old\n").unwrap();
    std::fs::write(tmp.path().join("outside/secret.md"), "SECRET\n").unwrap();
    let vault = Vault::open(&v, Limits::default()).unwrap();
    (tmp, vault)
}

fn p(s: &str) -> VaultPath {
    VaultPath::parse(s).unwrap()
}

/// Every file under `dir` with its bytes, sorted: to compare a tree before and after.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walkdir(dir) {
        let rel = entry
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = std::fs::symlink_metadata(&entry).unwrap();
        let bytes = if meta.is_file() {
            std::fs::read(&entry).unwrap()
        } else if meta.file_type().is_symlink() {
            std::fs::read_link(&entry)
                .unwrap()
                .to_string_lossy()
                .into_owned()
                .into_bytes()
        } else {
            b"<dir>".to_vec()
        };
        out.push((rel, bytes));
    }
    out.sort();
    out
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let path = e.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        out.push(path.clone());
        if meta.is_dir() {
            out.extend(walkdir(&path));
        }
    }
    out
}

fn no_temp_files(dir: &Path) {
    for f in walkdir(dir) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.starts_with(super::write::TEMP_PREFIX),
            "temporary file left: {}",
            f.display()
        );
    }
}

#[test]
fn a_created_file_has_the_bytes_and_version_and_leaves_no_temporary_file() {
    let (tmp, vault) = setup();
    let w = vault
        .write_file(&p("Notes/new.md"), b"hello\n", &Expect::Absent)
        .unwrap();
    let root = tmp.path().join("v");
    assert_eq!(
        std::fs::read(root.join("Notes/new.md")).unwrap(),
        b"hello\n"
    );
    assert_eq!(w.sha256, sha256_hex(b"hello\n"));
    assert_eq!(w.meta.size, 6);
    assert_eq!(w.other_links, 0);
    no_temp_files(&root);
}

#[test]
fn creating_never_replaces_an_existing_file() {
    let (tmp, vault) = setup();
    let e = vault
        .write_file(&p("Notes/a.md"), b"new\n", &Expect::Absent)
        .unwrap_err();
    assert!(matches!(e, VaultError::Exists(_)), "{e}");
    let root = tmp.path().join("v");
    assert_eq!(std::fs::read(root.join("Notes/a.md")).unwrap(), b"old\n");
    no_temp_files(&root);
}

#[test]
fn a_replace_needs_the_current_version_and_reports_the_new_one_on_conflict() {
    let (tmp, vault) = setup();
    let root = tmp.path().join("v");
    let e = vault
        .write_file(
            &p("Notes/a.md"),
            b"new\n",
            &Expect::Version(sha256_hex(b"stale")),
        )
        .unwrap_err();
    match e {
        VaultError::Changed { current_sha256, .. } => {
            assert_eq!(current_sha256, sha256_hex(b"old\n"));
        }
        other => panic!("{other}"),
    }
    assert_eq!(std::fs::read(root.join("Notes/a.md")).unwrap(), b"old\n");
    let e = vault
        .write_file(
            &p("Notes/none.md"),
            b"x",
            &Expect::Version(sha256_hex(b"x")),
        )
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    no_temp_files(&root);
}

#[test]
fn a_replace_keeps_the_permission_bits_and_never_writes_through_a_hard_link() {
    let (tmp, vault) = setup();
    let root = tmp.path().join("v");
    let note = root.join("Notes/a.md");
    std::fs::set_permissions(&note, std::fs::Permissions::from_mode(0o640)).unwrap();
    // A hard link from outside the vault to the note.
    let outside = tmp.path().join("outside/linked.md");
    std::fs::hard_link(&note, &outside).unwrap();
    let w = vault
        .write_file(
            &p("Notes/a.md"),
            b"new\n",
            &Expect::Version(sha256_hex(b"old\n")),
        )
        .unwrap();
    assert_eq!(std::fs::read(&note).unwrap(), b"new\n");
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        b"old\n",
        "the outside link kept its bytes"
    );
    assert_eq!(w.other_links, 1);
    let mode = std::fs::metadata(&note).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
    no_temp_files(&root);
}

#[test]
fn no_write_lands_outside_the_vault_in_a_hidden_folder_or_through_a_symlink() {
    let (tmp, vault) = setup();
    let root = tmp.path().join("v");
    let outside = tmp.path().join("outside");
    symlink("../outside", root.join("out")).unwrap();
    symlink(outside.join("secret.md"), root.join("Notes/abs.md")).unwrap();
    symlink("../../outside/secret.md", root.join("Notes/rel.md")).unwrap();
    symlink("../../outside/dangling.md", root.join("Notes/dangling.md")).unwrap();
    symlink(".obsidian", root.join("pub")).unwrap();
    symlink("a.md", root.join("Notes/inside.md")).unwrap();
    let before_outside = tree(&outside);
    let before_hidden = tree(&root.join(".obsidian"));
    let before_a = std::fs::read(root.join("Notes/a.md")).unwrap();
    for (path, expect) in [
        ("out/new.md", Expect::Absent),
        ("out/secret.md", Expect::Version(sha256_hex(b"SECRET\n"))),
        ("Notes/abs.md", Expect::Version(sha256_hex(b"SECRET\n"))),
        ("Notes/rel.md", Expect::Version(sha256_hex(b"SECRET\n"))),
        ("Notes/dangling.md", Expect::Absent),
        ("pub/app.json", Expect::Absent),
        ("Notes/inside.md", Expect::Version(sha256_hex(b"old\n"))),
    ] {
        let r = vault.write_file(&p(path), b"PWNED\n", &expect);
        assert!(r.is_err(), "{path}: written");
    }
    assert!(
        VaultPath::parse(".obsidian/app.json").is_err(),
        "hidden paths do not parse"
    );
    assert_eq!(tree(&outside), before_outside);
    assert_eq!(tree(&root.join(".obsidian")), before_hidden);
    assert_eq!(std::fs::read(root.join("Notes/a.md")).unwrap(), before_a);
    assert_eq!(
        std::fs::read_link(root.join("Notes/inside.md")).unwrap(),
        Path::new("a.md"),
        "a symlink is never replaced by a file"
    );
    no_temp_files(&root);
    no_temp_files(&outside);
}

#[test]
fn excluded_locations_are_not_writable_directly_or_through_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("v");
    std::fs::create_dir_all(root.join("Private")).unwrap();
    std::fs::create_dir_all(root.join("Notes")).unwrap();
    std::fs::create_dir_all(root.join("Keep")).unwrap();
    symlink("../Private", root.join("Notes/pub")).unwrap();
    // The folder `Keep` is not excluded, the notes in it are: reached through a link, the new
    // name is checked where it really lands.
    symlink("../Keep", root.join("Notes/keep")).unwrap();
    let globs = ["Private", "**/*.secret.md", "Keep/*.md"].map(str::to_owned);
    let vault = Vault::open(&root, Limits::default())
        .unwrap()
        .with_exclusions(Exclusions::new(&globs).unwrap());
    for path in [
        "Private/x.md",
        "private/x.md",
        "Notes/pub/x.md",
        "Notes/a.secret.md",
        "Notes/keep/x.md",
    ] {
        let e = vault
            .write_file(&p(path), b"x", &Expect::Absent)
            .unwrap_err();
        assert!(matches!(e, VaultError::Excluded(_)), "{path}: {e}");
    }
    assert!(tree(&root.join("Private")).is_empty());
    assert!(tree(&root.join("Keep")).is_empty());
    assert!(!root.join("Notes/a.secret.md").exists());
}

#[test]
fn a_folder_swapped_for_a_symlink_during_writes_never_lets_one_out() {
    // A thread swaps `v/sub` between a real folder and a symlink to the outside folder while
    // writes to `sub/n.md` run: every write lands in the vault's own `sub` or fails.
    let (tmp, vault) = setup();
    let root = tmp.path().join("v");
    let outside = tmp.path().join("outside");
    let before = tree(&outside);
    let sub = root.join("sub");
    let real = root.join("sub-real");
    std::fs::create_dir_all(&real).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, sub) = (stop.clone(), sub.clone());
        std::thread::spawn(move || {
            let link = sub.with_extension("link");
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(&link);
                // Relative targets: the resolver refuses absolute ones outright.
                if n.is_multiple_of(2) {
                    symlink("../outside", &link).unwrap();
                } else {
                    symlink("sub-real", &link).unwrap();
                }
                // Atomically replace `sub` (a symlink either way) with the new link.
                std::fs::rename(&link, &sub).unwrap();
                n += 1;
            }
            n
        })
    };
    let mut written = 0;
    let started = std::time::Instant::now();
    let mut i = 0u64;
    while started.elapsed() < std::time::Duration::from_millis(800) {
        let name = format!("sub/n{i}.md");
        if vault.write_file(&p(&name), b"x", &Expect::Absent).is_ok() {
            written += 1;
        }
        i += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the swapper ran ({swaps} swaps)");
    assert_eq!(tree(&outside), before, "a write landed outside the vault");
    // Half the time `sub` leads to the in-vault `sub-real`: those writes land there, and only
    // there.
    assert!(written > 0, "no write went through the in-vault link");
    let landed = walkdir(&real).len();
    assert_eq!(landed, written, "every successful write is in the vault");
    no_temp_files(&root);
    no_temp_files(&outside);
}

#[test]
fn a_folder_swapped_for_a_symlink_during_creates_moves_and_deletes_never_reaches_out() {
    // As above, with every other change a write tool makes: folders created under `sub`, files
    // moved into and out of it, moved to the trash and removed from it. The outside folder
    // holds `secret.md` (the target of every move, trash and removal through `sub`) and must
    // end exactly as it began; nothing may appear in it.
    let (tmp, vault) = setup();
    let root = tmp.path().join("v");
    let outside = tmp.path().join("outside");
    let before = tree(&outside);
    let sub = root.join("sub");
    let real = root.join("sub-real");
    std::fs::create_dir_all(&real).unwrap();
    // `sub` is a symlink from the start (a missing `sub` would be created as a real folder).
    symlink("sub-real", &sub).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, sub) = (stop.clone(), sub.clone());
        std::thread::spawn(move || {
            let link = sub.with_extension("link");
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(&link);
                let target = if n.is_multiple_of(2) {
                    "../outside"
                } else {
                    "sub-real"
                };
                symlink(target, &link).unwrap();
                std::fs::rename(&link, &sub).unwrap();
                n += 1;
            }
            n
        })
    };
    let started = std::time::Instant::now();
    let (mut i, mut done) = (0u64, 0);
    while started.elapsed() < std::time::Duration::from_millis(1200) {
        // Something to move in, and something the real `sub` holds to take out.
        std::fs::write(root.join(format!("Notes/m{i}.md")), "m").unwrap();
        std::fs::write(real.join("secret.md"), "in vault").unwrap();
        let ok = [
            vault.create_folders(&p(&format!("sub/d{i}/e"))).is_ok(),
            vault
                .move_entry(
                    &p(&format!("Notes/m{i}.md")),
                    &p(&format!("sub/m{i}.md")),
                    None,
                )
                .is_ok(),
            vault
                .move_entry(&p("sub/secret.md"), &p(&format!("Notes/s{i}.md")), None)
                .is_ok(),
            vault.trash_entry(&p("sub/secret.md"), None).is_ok(),
            vault.remove_entry(&p("sub/secret.md"), None).is_ok(),
        ];
        done += ok.iter().filter(|&&b| b).count();
        i += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the swapper ran ({swaps} swaps)");
    assert!(done > 0, "no operation went through the in-vault link");
    assert_eq!(
        tree(&outside),
        before,
        "something outside the vault changed"
    );
    no_temp_files(&outside);
}

#[test]
fn moves_never_replace_and_the_trash_takes_a_free_name() {
    let (tmp, vault) = setup();
    let root = tmp.path().join("v");
    std::fs::write(root.join("Notes/b.md"), "b\n").unwrap();
    assert!(matches!(
        vault.move_entry(&p("Notes/a.md"), &p("Notes/b.md"), None),
        Err(VaultError::Exists(_))
    ));
    assert_eq!(
        std::fs::read_to_string(root.join("Notes/b.md")).unwrap(),
        "b\n"
    );
    assert!(
        vault
            .move_entry(&p("Notes"), &p("Notes/inner"), None)
            .is_err()
    );
    // A stale version refuses the move.
    assert!(matches!(
        vault.move_entry(&p("Notes/a.md"), &p("c.md"), Some(&sha256_hex(b"other"))),
        Err(VaultError::Changed { .. })
    ));
    let first = vault.trash_entry(&p("Notes/a.md"), None).unwrap();
    std::fs::write(root.join("Notes/a.md"), "again\n").unwrap();
    let second = vault.trash_entry(&p("Notes/a.md"), None).unwrap();
    assert_eq!(
        (first.to.as_str(), second.to.as_str()),
        (".trash/a.md", ".trash/a 1.md")
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".trash/a 1.md")).unwrap(),
        "again\n"
    );
    // A trash that is a symlink is refused, never followed.
    let (tmp2, vault2) = setup();
    let root2 = tmp2.path().join("v");
    symlink(tmp2.path().join("outside"), root2.join(".trash")).unwrap();
    assert!(vault2.trash_entry(&p("Notes/a.md"), None).is_err());
    assert!(root2.join("Notes/a.md").exists());
    drop(tmp);
}

#[test]
fn a_folder_survey_counts_what_a_client_cannot_see_and_stops_at_its_bounds() {
    let (tmp, vault) = setup();
    let v = tmp.path().join("v");
    for (path, text) in [
        ("F/a.md", "a"),
        ("F/.git/config", "c"),
        ("F/Private/s.md", "s"),
        ("F/Sub/Deep/b.md", "b"),
        ("F/img.png", "i"),
    ] {
        std::fs::create_dir_all(v.join(path).parent().unwrap()).unwrap();
        std::fs::write(v.join(path), text).unwrap();
    }
    symlink("a.md", v.join("F/link.md")).unwrap();
    let vault = vault.with_exclusions(
        Exclusions::new(&["F/Private".to_owned(), "To/Sub/**".to_owned()]).unwrap(),
    );
    let s = vault.survey_folder(&p("F"), None, 64).unwrap();
    // `.git` and the excluded folder, each counted once and not entered.
    assert_eq!((s.unseen, s.other, s.depth), (2, 1, 3));
    let mut files: Vec<&str> = s.files.iter().map(VaultPath::as_str).collect();
    files.sort_unstable();
    assert_eq!(files, ["F/Sub/Deep/b.md", "F/a.md", "F/img.png"]);
    assert!(!s.too_deep && !s.too_many && s.excluded_at_destination == 0);
    // At a destination where `Sub/**` is excluded, what lies inside `Sub` is counted.
    let s = vault.survey_folder(&p("F"), Some(&p("To")), 64).unwrap();
    assert_eq!(s.excluded_at_destination, 1);
    // Two levels allowed: `Sub/Deep/b.md` is one too deep, and is not looked at.
    let s = vault.survey_folder(&p("F"), None, 2).unwrap();
    assert!(s.too_deep);
    assert!(!s.files.iter().any(|f| f.as_str() == "F/Sub/Deep/b.md"));
}
