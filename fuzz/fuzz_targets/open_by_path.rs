//! Fuzzes the vault operations that take a client path (`read_file`, `stat_file`,
//! `check_folder`, `walk` + `ScanEntry::read`) over a fixed tree full of hostile symlinks.
//!
//! The tree (built once per process in a temp dir):
//!
//! ```text
//! outside/secret.md              FUZZ-OUTSIDE-SECRET-7f3a
//! vault/a.md, dir/b.md, dir/sub/c.md
//! vault/.obsidian/app.json       FUZZ-HIDDEN-SECRET-91c2
//! vault/esc_rel -> ../outside    vault/esc_abs -> <abs>/outside
//! vault/dir/esc_file.md -> ../../outside/secret.md
//! vault/loop1 -> loop2           vault/loop2 -> loop1
//! vault/self -> .                vault/up -> ..
//! vault/dir/hidden_link -> ../.obsidian
//! vault/ok_link.md -> dir/b.md
//! vault/dir/chain -> ../dir2     vault/dir2 -> dir
//! vault/fifo.md                  (a FIFO)
//! ```
//!
//! Each input is tried twice: as (lossy) UTF-8 text, and as a path built from the bytes by
//! mapping each byte to one name of a small alphabet, so the fuzzer explores the tree
//! structurally. Whatever is read must be one of the in-vault notes (never a marker), nothing
//! may panic or hang (the FIFO must fail fast), and no error may mention the host path.

#![no_main]
// The fixture is built with std::fs, like the crate's tests; clippy.toml's rule is about the
// product's code.
#![allow(clippy::disallowed_methods)]

use std::ops::ControlFlow;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use capvault::vault::{Limits, Vault, VaultPath};
use libfuzzer_sys::fuzz_target;

const OUTSIDE_MARKER: &str = "FUZZ-OUTSIDE-SECRET-7f3a";
const HIDDEN_MARKER: &str = "FUZZ-HIDDEN-SECRET-91c2";

const NOTE_A: &str = "# A\nnote a, links to [[b]]\n";
const NOTE_B: &str = "# B\nnote b in dir\n";
const NOTE_C: &str = "# C\nnote c in dir/sub\n";

/// Names the structural half of the target builds paths from (byte % len).
const ALPHABET: &[&str] = &[
    "a.md",
    "dir",
    "sub",
    "b.md",
    "c.md",
    "esc_rel",
    "esc_abs",
    "esc_file.md",
    "loop1",
    "self",
    "up",
    "hidden_link",
    "ok_link.md",
    "chain",
    "dir2",
    "fifo.md",
    "secret.md",
    "app.json",
    "..",
    ".",
    ".obsidian",
    "",
];

struct Fixture {
    vault: Vault,
    /// Host paths that must never appear in an error message.
    host_paths: Vec<String>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(build_fixture)
}

fn build_fixture() -> Fixture {
    let tmp = tempfile::Builder::new()
        .prefix("capvault-fuzz-")
        .tempdir()
        .expect("create temp dir");
    // Lives for the whole process (libFuzzer exits without running destructors anyway).
    let base: PathBuf = tmp.keep();
    let outside = base.join("outside");
    let vault_dir = base.join("vault");

    let mkdir = |p: &Path| std::fs::create_dir_all(p).expect("mkdir");
    let write = |p: &Path, s: &str| std::fs::write(p, s).expect("write");
    let link = |target: &Path, at: &Path| symlink(target, at).expect("symlink");

    mkdir(&outside);
    write(&outside.join("secret.md"), &format!("{OUTSIDE_MARKER}\n"));

    mkdir(&vault_dir.join("dir/sub"));
    mkdir(&vault_dir.join(".obsidian"));
    write(&vault_dir.join("a.md"), NOTE_A);
    write(&vault_dir.join("dir/b.md"), NOTE_B);
    write(&vault_dir.join("dir/sub/c.md"), NOTE_C);
    write(
        &vault_dir.join(".obsidian/app.json"),
        &format!("{{\"secret\": \"{HIDDEN_MARKER}\"}}\n"),
    );

    link(Path::new("../outside"), &vault_dir.join("esc_rel"));
    link(&outside, &vault_dir.join("esc_abs"));
    link(
        Path::new("../../outside/secret.md"),
        &vault_dir.join("dir/esc_file.md"),
    );
    link(Path::new("loop2"), &vault_dir.join("loop1"));
    link(Path::new("loop1"), &vault_dir.join("loop2"));
    link(Path::new("."), &vault_dir.join("self"));
    link(Path::new(".."), &vault_dir.join("up"));
    link(
        Path::new("../.obsidian"),
        &vault_dir.join("dir/hidden_link"),
    );
    link(Path::new("dir/b.md"), &vault_dir.join("ok_link.md"));
    link(Path::new("../dir2"), &vault_dir.join("dir/chain"));
    link(Path::new("dir"), &vault_dir.join("dir2"));
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &vault_dir.join("fifo.md"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");

    let vault = Vault::open(&vault_dir, Limits::default()).expect("open vault");

    let mut host_paths = vec![base.display().to_string()];
    if let Ok(canon) = base.canonicalize() {
        host_paths.push(canon.display().to_string());
    }
    let fixture = Fixture { vault, host_paths };
    self_check(&fixture);
    fixture
}

/// Makes sure the tree is what the target thinks it is, so a run can't pass vacuously.
fn self_check(fx: &Fixture) {
    let v = &fx.vault;
    let p = |s: &str| VaultPath::parse(s).unwrap();
    assert_eq!(v.read_file(&p("a.md")).unwrap().bytes, NOTE_A.as_bytes());
    assert_eq!(
        v.read_file(&p("dir/sub/c.md")).unwrap().bytes,
        NOTE_C.as_bytes()
    );
    assert_eq!(
        v.read_file(&p("ok_link.md")).unwrap().bytes,
        NOTE_B.as_bytes()
    );
    assert_eq!(
        v.read_file(&p("dir2/b.md")).unwrap().bytes,
        NOTE_B.as_bytes()
    );
    assert_eq!(
        v.read_file(&p("dir/chain/b.md")).unwrap().bytes,
        NOTE_B.as_bytes()
    );
    assert_eq!(
        v.read_file(&p("self/a.md")).unwrap().bytes,
        NOTE_A.as_bytes()
    );
    for refused in [
        "esc_rel/secret.md",
        "esc_abs/secret.md",
        "dir/esc_file.md",
        "dir/hidden_link/app.json",
        "up/vault/a.md",
        "up/outside/secret.md",
        "loop1",
        "fifo.md",
    ] {
        let err = v.read_file(&p(refused)).expect_err(refused);
        check_vault_error(fx, refused, &err);
    }
    let mut seen = Vec::new();
    v.walk(&VaultPath::root(), true, &|_| true, &mut |e| {
        seen.push(e.path.as_str().to_owned());
        ControlFlow::Continue(())
    })
    .unwrap();
    seen.sort();
    assert_eq!(seen, ["a.md", "dir/b.md", "dir/sub/c.md", "ok_link.md"]);
}

fn check_bytes(what: &str, bytes: &[u8]) {
    let leaked = |m: &str| bytes.windows(m.len()).any(|w| w == m.as_bytes());
    assert!(!leaked(OUTSIDE_MARKER), "{what}: read the outside secret");
    assert!(!leaked(HIDDEN_MARKER), "{what}: read the hidden secret");
    assert!(
        [NOTE_A, NOTE_B, NOTE_C]
            .iter()
            .any(|n| n.as_bytes() == bytes),
        "{what}: read bytes that are not one of the vault's notes: {:?}",
        String::from_utf8_lossy(bytes)
    );
}

/// Errors echo the client's own path, so a needle the client typed itself may come back; any
/// other appearance of a host path or a marker is a leak.
fn check_error_text(fx: &Fixture, candidate: &str, text: &str) {
    let needles = fx
        .host_paths
        .iter()
        .map(String::as_str)
        .chain([OUTSIDE_MARKER, HIDDEN_MARKER]);
    for needle in needles {
        if !candidate.contains(needle) {
            assert!(!text.contains(needle), "error leaks {needle:?}: {text:?}");
        }
    }
}

fn exercise(fx: &Fixture, candidate: &str) {
    let v = &fx.vault;
    if let Ok(path) = VaultPath::parse(candidate) {
        match v.read_file(&path) {
            Ok(data) => {
                check_bytes(path.as_str(), &data.bytes);
                assert_eq!(data.bytes.len() as u64, data.meta.size);
            }
            Err(e) => check_vault_error(fx, candidate, &e),
        }
        if let Err(e) = v.stat_file(&path) {
            check_vault_error(fx, candidate, &e);
        }
        if let Err(e) = v.check_folder(&path) {
            check_vault_error(fx, candidate, &e);
        }
    }
    if let Ok(folder) = VaultPath::parse_folder(candidate) {
        for recursive in [false, true] {
            let result = v.walk(&folder, recursive, &|_| true, &mut |entry| {
                assert!(
                    entry.path.starts_with(&folder),
                    "walk of {folder} reported {} outside it",
                    entry.path
                );
                assert_eq!(
                    VaultPath::parse(entry.path.as_str()).as_ref(),
                    Ok(&entry.path),
                    "walk reported a path a client could not give"
                );
                match entry.read(v) {
                    Ok(data) => check_bytes(entry.path.as_str(), &data.bytes),
                    Err(e) => check_vault_error(fx, candidate, &e),
                }
                ControlFlow::Continue(())
            });
            if let Err(e) = result {
                check_vault_error(fx, candidate, &e);
            }
        }
    }
}

fn check_vault_error(fx: &Fixture, candidate: &str, e: &capvault::vault::VaultError) {
    check_error_text(fx, candidate, &e.to_string());
    check_error_text(fx, candidate, &format!("{e:?}"));
}

fuzz_target!(|data: &[u8]| {
    let fx = fixture();

    let text = String::from_utf8_lossy(data);
    exercise(fx, &text);

    let structural: Vec<&str> = data
        .iter()
        .map(|&b| ALPHABET[usize::from(b) % ALPHABET.len()])
        .collect();
    let structural = structural.join("/");
    if structural != text {
        exercise(fx, &structural);
    }
});
