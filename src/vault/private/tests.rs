//! Test-only module: the private folders' rules under attack. Fixtures are built with `std::fs`
//! by the tests themselves; the code under test sees only the folder's handle.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

/// A private folder `private` in a fresh temporary folder (which stands for "outside").
fn folder() -> (tempfile::TempDir, PrivateDir) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("private");
    let dir = open_folder(&path, FOLDER_MODE, None).unwrap();
    (tmp, PrivateDir::new(dir, FILE_MODE).unwrap())
}

/// Every name (relative to `root`) below it, sorted.
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(root).unwrap().display().to_string());
            if path.symlink_metadata().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

fn is_bad_name(e: &io::Error) -> bool {
    matches!(refusal(e), Some(Refused::BadName))
}

/// Names that would leave the folder, hide in it, or mean something else elsewhere.
const REFUSED: &[&str] = &[
    "",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "a/b",
    "a/../b",
    "/etc/passwd",
    "/",
    "a\\b",
    "..\\x",
    "C:x",
    ".hidden",
    ".lock",
    "x\0y",
    "\0",
    "a\nb",
    "a b",
    "café",
    "a*b",
];

#[test]
fn names_that_leave_the_folder_hide_or_are_odd_are_refused_by_every_operation() {
    let (tmp, dir) = folder();
    let too_long = "x".repeat(MAX_NAME + 1);
    let names = REFUSED.iter().copied().chain([too_long.as_str()]);
    let before = tree(tmp.path());
    for bad in names {
        assert!(!valid_name(bad), "{bad:?} accepted");
        assert!(!dir.allows(bad), "{bad:?} allowed");
        let refused = |what: &str, done: io::Result<()>| match done {
            Err(e) => assert!(is_bad_name(&e), "{what} {bad:?}: {e:?}"),
            Ok(()) => panic!("{what} {bad:?} done"),
        };
        refused("read", dir.read(bad, 10).map(drop));
        refused("open", dir.open_file(bad).map(drop));
        refused("create", dir.create(bad).map(drop));
        refused("scratch", dir.scratch(bad).map(drop));
        refused("write", dir.write(bad, b"x"));
        refused("replace", dir.replace(bad, b"x"));
        refused("append", dir.append(bad, b"x").map(drop));
        refused("append-open", dir.open_append(bad).map(drop));
        refused("remove", dir.remove(bad));
        refused("rename to", dir.rename("ok", bad));
        refused("rename", dir.rename(bad, "ok"));
        refused("lock", dir.lock(bad, Duration::ZERO).map(drop));
        refused(
            "sub-folder",
            dir.sub_dir(bad).map(drop).map_err(io::Error::from),
        );
        let opened = dir.open_sub_dir(bad).map(drop).map_err(io::Error::from);
        refused("open sub-folder", opened);
        assert!(dir.stamp(bad).is_none(), "stamp {bad:?}");
    }
    assert_eq!(tree(tmp.path()), before, "something was created");
}

#[test]
fn plain_names_of_every_current_user_are_accepted() {
    let sha = "a".repeat(64);
    let longest = "x".repeat(MAX_NAME);
    for good in [
        // The index cache: tantivy's files, the manifest, the side files.
        "meta.json",
        "manifest.json",
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9.idx",
        "0a1b2c3d.17.del",
        "embeddings.bin",
        "texts.bin.tmp",
        "pdf-texts.json",
        "changes.log",
        "index-1",
        "803-1a2b",
        // The state folder: versions, logs, locks, records, ids, sub-folders' files.
        sha.as_str(),
        "history.jsonl",
        "audit.jsonl",
        "writers.lock",
        "registry.lock",
        "vault.json",
        "v0123456789abcdef0123456789abcdef",
        "grants.json",
        "passphrase",
        "pending.json",
        // A model's files.
        "config.json",
        "tokenizer.json",
        "model.safetensors.part",
        longest.as_str(),
    ] {
        assert!(valid_name(good), "{good:?} refused");
    }
}

#[test]
fn reserved_names_are_out_of_reach_and_out_of_listings() {
    let (_tmp, dir) = folder();
    dir.write("lock", b"").unwrap();
    dir.write("data", b"x").unwrap();
    let dir = dir.reserve(&["lock"]);
    assert!(!dir.allows("lock"));
    assert!(is_bad_name(&dir.remove("lock").unwrap_err()));
    assert!(is_bad_name(&dir.write("lock", b"y").unwrap_err()));
    assert!(is_bad_name(&dir.lock("lock", Duration::ZERO).unwrap_err()));
    assert_eq!(dir.names().unwrap(), ["data"]);
}

#[cfg(unix)]
#[test]
fn the_append_open_refuses_a_symlink_planted_at_the_name_and_writes_nothing_through_it() {
    let (tmp, dir) = folder();
    let inside = tmp.path().join("private");
    let planted = inside.join("audit.jsonl");
    // To a file of the folder (a kept version, say): only O_NOFOLLOW stands in the way. To a
    // file outside: cap-std's own confinement would stop it too.
    let version = inside.join("version");
    std::fs::write(&version, b"before").unwrap();
    let outside = tmp.path().join("target");
    std::fs::write(&outside, b"before").unwrap();
    for target in [Path::new("version"), outside.as_path()] {
        let _ = std::fs::remove_file(&planted);
        std::os::unix::fs::symlink(target, &planted).unwrap();
        assert!(dir.append("audit.jsonl", b"evil\n").is_err(), "{target:?}");
        assert!(dir.open_append("audit.jsonl").is_err(), "{target:?}");
        // The same append-open the audit log (a name the user gave) goes through.
        let appended = append_to(dir.dir(), "audit.jsonl", FILE_MODE, b"evil\n");
        assert!(appended.is_err(), "{target:?}");
    }
    assert_eq!(std::fs::read(&version).unwrap(), b"before");
    assert_eq!(std::fs::read(&outside).unwrap(), b"before");
    // A dangling link: nothing is created where it points.
    std::fs::remove_file(&planted).unwrap();
    std::os::unix::fs::symlink("created", &planted).unwrap();
    assert!(dir.append("audit.jsonl", b"evil\n").is_err());
    let made = std::fs::symlink_metadata(inside.join("created"));
    assert!(made.is_err(), "created through the link");
    // The link itself is left as it was, never replaced by a file.
    assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink());
}

#[cfg(unix)]
#[test]
fn appends_go_to_a_private_regular_file_and_return_where_they_landed() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, dir) = folder();
    assert_eq!(dir.append("log", b"one\n").unwrap(), 0);
    assert_eq!(dir.append("log", b"two\n").unwrap(), 4);
    let path = tmp.path().join("private/log");
    assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A folder at the name is not appended to.
    std::fs::create_dir(tmp.path().join("private/sub")).unwrap();
    let e = dir.append("sub", b"x").unwrap_err();
    assert!(
        matches!(refusal(&e), Some(Refused::NotAFile)) || e.kind() == io::ErrorKind::IsADirectory,
        "{e:?}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_planted_at_a_name_is_refused_without_waiting_for_a_writer() {
    let (tmp, dir) = folder();
    let fifo = tmp.path().join("private/pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let start = Instant::now();
    let e = dir.read("pipe", 10).unwrap_err();
    assert!(matches!(refusal(&e), Some(Refused::NotAFile)), "{e:?}");
    assert!(dir.open_file("pipe").is_err());
    assert!(dir.append("pipe", b"x").is_err());
    assert!(dir.lock("pipe", Duration::ZERO).is_err());
    assert!(start.elapsed() < Duration::from_secs(5), "an open waited");
}

#[cfg(unix)]
#[test]
fn reads_refuse_a_symlink_out_and_replaces_swap_the_link_not_its_target() {
    let (tmp, dir) = folder();
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, b"outside").unwrap();
    let planted = tmp.path().join("private/meta.json");
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    assert!(dir.read("meta.json", 100).is_err());
    assert!(dir.open_file("meta.json").is_err());
    assert!(dir.stamp("meta.json").is_none());
    // A link to a file of the folder is no way in either (only O_NOFOLLOW stops this one).
    dir.write("inner", b"inner").unwrap();
    std::os::unix::fs::symlink("inner", tmp.path().join("private/alias")).unwrap();
    assert!(dir.read("alias", 100).is_err());
    assert!(dir.open_file("alias").is_err());
    assert!(dir.stamp("alias").is_none());
    assert!(dir.create("meta.json").is_err());
    // A replace renames a new file over the link: the target keeps its bytes.
    dir.replace("meta.json", b"mine").unwrap();
    assert_eq!(std::fs::read(&secret).unwrap(), b"outside");
    assert_eq!(dir.read("meta.json", 100).unwrap().unwrap(), b"mine");
    // A symlink planted at a temporary name is removed, not written through.
    std::os::unix::fs::symlink(&secret, tmp.path().join("private").join(temp_name("m"))).unwrap();
    dir.write("m", b"new").unwrap();
    assert_eq!(std::fs::read(&secret).unwrap(), b"outside");
    // A sub-folder that is a symlink is refused, even to a real folder.
    std::os::unix::fs::symlink(tmp.path(), tmp.path().join("private/up")).unwrap();
    assert!(dir.sub_dir("up").is_err());
    assert!(dir.open_sub_dir("up").is_err());
}

#[test]
fn a_read_over_its_cap_is_refused_and_a_missing_file_is_none() {
    let (_tmp, dir) = folder();
    assert!(dir.read("absent", 10).unwrap().is_none());
    dir.write("f", b"0123456789").unwrap();
    assert_eq!(dir.read("f", 10).unwrap().unwrap(), b"0123456789");
    assert!(dir.read("f", 9).is_err());
    assert_eq!(dir.stamp("f").unwrap().len(), 10);
}

#[test]
fn a_lock_excludes_a_second_holder_until_dropped() {
    let (_tmp, dir) = folder();
    let held = dir.lock("x.lock", Duration::ZERO).unwrap();
    // flock is per open file description: a second open conflicts as another process would.
    let start = Instant::now();
    let again = dir.lock("x.lock", Duration::from_millis(50));
    assert_eq!(again.unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert!(
        start.elapsed() >= Duration::from_millis(50),
        "gave up early"
    );
    // Another lock of the folder is another lock.
    let other = dir.lock("y.lock", Duration::ZERO).unwrap();
    drop(held);
    assert!(dir.lock("x.lock", Duration::ZERO).is_ok());
    drop(other);
}

#[test]
fn a_waiting_locker_gets_the_lock_once_it_is_released() {
    let (_tmp, dir) = folder();
    let held = dir.lock("x.lock", Duration::ZERO).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(60));
        drop(held);
    });
    let start = Instant::now();
    let got = dir.lock("x.lock", Duration::from_secs(10));
    assert!(got.is_ok(), "{got:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    release.join().unwrap();
}

#[test]
fn the_folder_lock_excludes_a_second_holder_and_adds_nothing_on_unix() {
    let (tmp, dir) = folder();
    let held = dir.lock_folder(Duration::ZERO).unwrap();
    let again = dir.lock_folder(Duration::from_millis(20));
    assert_eq!(again.unwrap_err().kind(), io::ErrorKind::WouldBlock);
    drop(held);
    assert!(dir.lock_folder(Duration::ZERO).is_ok());
    if cfg!(unix) {
        assert!(tree(&tmp.path().join("private")).is_empty());
    }
}

#[cfg(unix)]
#[test]
fn folders_others_can_write_to_are_refused_and_new_ones_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, dir) = folder();
    let sub = dir.sub_dir("sub").unwrap();
    sub.write("f", b"x").unwrap();
    let sub_path = tmp.path().join("private/sub");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sub_path), 0o700);
    assert_eq!(mode(&sub_path.join("f")), 0o600);
    std::fs::set_permissions(&sub_path, std::fs::Permissions::from_mode(0o770)).unwrap();
    assert!(matches!(dir.sub_dir("sub"), Err(FolderError::NotPrivate)));
    assert!(matches!(
        dir.open_sub_dir("sub"),
        Err(FolderError::NotPrivate)
    ));
    let open = open_folder(&sub_path, FOLDER_MODE, None).unwrap();
    assert!(matches!(
        PrivateDir::new(open, FILE_MODE),
        Err(FolderError::NotPrivate)
    ));
    // Nothing is opened for a path with `..` in it.
    let dotted = tmp.path().join("private/../private");
    assert!(matches!(
        open_folder(&dotted, FOLDER_MODE, None),
        Err(FolderError::BadPath)
    ));
}
