//! The symlink-swap race against the resolver itself, in-process (no client in between, so it
//! reaches volume): reader threads read `swap/note.md` and writer threads create notes under
//! `swap/` while a thread keeps swapping `swap` between a real folder and a symlink that leads
//! outside the vault. Not one read may return the outside file, and not one write may land
//! outside.
//!
//! `cargo test` runs a short version (20,000 reads); the full run is an explicit command:
//!
//! ```sh
//! CAPVAULT_RACE_READS=1000000 cargo test --release --test integration races:: -- --nocapture
//! ```
//!
//! Both cap-std code paths are proven: the same races run again in a child process where a
//! seccomp filter makes `openat2` fail with ENOSYS, which forces cap-std's component-by-component
//! fallback (what older kernels and some container profiles give).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::common::{symlink, write_tree};
use capvault::vault::{Expect, Limits, Vault, VaultPath};

const SECRET: &[u8] = b"OUTSIDE-SECRET-race";
#[cfg(target_os = "linux")]
const CHILD: &str = "CAPVAULT_RACE_CHILD_NO_OPENAT2";

fn reads_wanted() -> u64 {
    std::env::var("CAPVAULT_RACE_READS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(files(&p));
        } else if !p.is_symlink() {
            out.push(p);
        }
    }
    out
}

/// The races, with `reads` reads in all; returns the report line.
fn race(reads: u64) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write_tree(
        root,
        &[
            ("outside/note.md", std::str::from_utf8(SECRET).unwrap()),
            ("vault/real/note.md", "inside note"),
        ],
    );
    let v = root.join("vault");
    // `swap` is always a symlink, atomically replaced: to the in-vault `real`, or outside.
    symlink(&v, "swap", "real");
    let outside_before = files(&root.join("outside"));
    let vault = Arc::new(Vault::open(&v, Limits::default()).unwrap());

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, v) = (Arc::clone(&stop), Arc::clone(&swaps), v.clone());
        std::thread::spawn(move || {
            let (swap, next) = (v.join("swap"), v.join("swap.next"));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&next);
                let target = if n.is_multiple_of(2) {
                    "../outside"
                } else {
                    "real"
                };
                std::os::unix::fs::symlink(target, &next).unwrap();
                std::fs::rename(&next, &swap).unwrap();
                n += 1;
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let (leaks, inside, refused, written) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let started = Instant::now();
    let note = VaultPath::parse("swap/note.md").unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (vault, note) = (Arc::clone(&vault), note.clone());
            let (leaks, inside, refused) = (
                Arc::clone(&leaks),
                Arc::clone(&inside),
                Arc::clone(&refused),
            );
            std::thread::spawn(move || {
                for _ in 0..reads / 2 {
                    match vault.read_file(&note) {
                        Ok(d) if d.bytes == SECRET => {
                            leaks.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(d) if d.bytes == b"inside note" => {
                            inside.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(d) => panic!("read something else: {:?}", d.bytes),
                        Err(_) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    // One writer creates notes under `swap/` for as long as the readers run.
    let writer = {
        let (vault, written, stop) = (Arc::clone(&vault), Arc::clone(&written), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let p = VaultPath::parse(&format!("swap/w{i}.md")).unwrap();
                if vault.write_file(&p, b"written", &Expect::Absent).is_ok() {
                    written.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        })
    };
    for r in readers {
        r.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    swapper.join().unwrap();
    let elapsed = started.elapsed();

    let (leaks, inside, refused, written, swaps) = (
        leaks.load(Ordering::Relaxed),
        inside.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        written.load(Ordering::Relaxed),
        swaps.load(Ordering::Relaxed),
    );
    let report = format!(
        "race: {} reads ({inside} inside, {refused} refused, {leaks} leaks), {written} writes \
         landed, {swaps} swaps in {elapsed:.1?}",
        inside + refused + leaks
    );
    eprintln!("{report}");
    assert_eq!(leaks, 0, "the outside file leaked: {report}");
    assert!(
        inside > 0 && refused > 0,
        "the race never went both ways: {report}"
    );
    assert!(swaps > 100, "the swapper barely ran: {report}");
    assert_eq!(
        files(&root.join("outside")),
        outside_before,
        "a write landed outside the vault: {report}"
    );
    let landed = files(&v.join("real"))
        .iter()
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with('w'))
        .count() as u64;
    assert_eq!(
        landed, written,
        "every write that succeeded is in the vault: {report}"
    );
    report
}

#[test]
fn reads_and_writes_racing_a_symlink_swap_never_leave_the_vault() {
    #[cfg(target_os = "linux")]
    if std::env::var_os(CHILD).is_some() {
        // The child: prove openat2 is gone here before racing.
        assert_eq!(
            openat2_errno(),
            Some(libc::ENOSYS),
            "openat2 still works in the child"
        );
    }
    race(reads_wanted());
}

/// The errno of a plain `openat2` of `/` (`None`: it succeeded).
#[cfg(target_os = "linux")]
fn openat2_errno() -> Option<i32> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: libc::O_RDONLY as u64 | libc::O_DIRECTORY as u64,
        mode: 0,
        resolve: 0,
    };
    // SAFETY: openat2(2) with a valid NUL-terminated path and a properly sized open_how.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c"/".as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: closing the descriptor just opened.
        unsafe { libc::close(fd as i32) };
        None
    } else {
        Some(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_same_races_hold_when_openat2_is_unavailable() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    assert_eq!(
        openat2_errno(),
        None,
        "this kernel has openat2: the fallback is what is forced"
    );
    // The test's full name in this test crate: its module path without the crate's name.
    let module = module_path!()
        .split_once("::")
        .map(|(_, m)| format!("{m}::"))
        .unwrap_or_default();
    let race = format!("{module}reads_and_writes_racing_a_symlink_swap_never_leave_the_vault");
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", race.as_str(), "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    crate::common::deny_openat2(&mut cmd);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{err}");
    assert!(
        stdout.contains("1 passed"),
        "the child ran no race: {stdout}"
    );
    let report = err
        .lines()
        .find(|l| l.starts_with("race: "))
        .expect("a report line");
    eprintln!("without openat2: {report}");
}
