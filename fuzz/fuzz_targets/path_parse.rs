//! Fuzzes `VaultPath::parse` and `VaultPath::parse_folder` with arbitrary strings.
//!
//! Neither may panic, and whatever they accept must uphold every `VaultPath` invariant:
//! the accepted text round-trips, each component is normal, visible and free of `\` and
//! control characters (a `:` only as literal text before a space), sizes are within the
//! limits, `std::path` sees only normal components, and parsing is idempotent.

#![no_main]

use std::path::{Component, Path};

use capvault::vault::VaultPath;
use capvault::vault::path::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };

    let parsed = VaultPath::parse(s);
    if let Ok(p) = &parsed {
        assert!(!p.is_root(), "parse accepted the root: {s:?}");
        assert_eq!(p.as_str(), s, "parse did not keep the input");
        assert_eq!(p.to_string(), s, "Display differs from the input");
        check_invariants(p);
        assert_eq!(
            VaultPath::parse(p.as_str()).as_ref(),
            Ok(p),
            "parse is not idempotent"
        );
    }

    let folder = VaultPath::parse_folder(s);
    if let Ok(f) = &folder {
        // One trailing `/` is the only thing parse_folder may drop.
        let expected = s.strip_suffix('/').unwrap_or(s);
        assert_eq!(
            f.as_str(),
            expected,
            "parse_folder changed more than one trailing `/`"
        );
        if f.is_root() {
            assert!(s.is_empty(), "parse_folder gave the root for {s:?}");
            assert_eq!(f.to_string(), "/");
        } else {
            assert_eq!(f.to_string(), expected);
            assert_eq!(
                VaultPath::parse(f.as_str()).as_ref(),
                Ok(f),
                "a parse_folder result does not parse as itself"
            );
        }
        check_invariants(f);
        assert_eq!(
            VaultPath::parse_folder(f.as_str()).as_ref(),
            Ok(f),
            "parse_folder is not idempotent"
        );
    }

    // Whatever parse accepts, parse_folder accepts identically.
    if let Ok(p) = &parsed {
        assert_eq!(folder.as_ref(), Ok(p), "parse and parse_folder disagree");
    }
});

/// Since 6d48d34 a `:` is allowed as literal text (`Project: Plan.md`), but only where Windows
/// could not read it as a drive (`C:`) or an alternate data stream (`name:stream`, `name::$DATA`,
/// `name:`): not first, always followed by a space, and never right after a leading ASCII letter.
fn check_colons(s: &str, c: &str) {
    if cfg!(windows) {
        assert!(!c.contains(':'), "colon in {s:?}");
        return;
    }
    let b = c.as_bytes();
    for (i, _) in b.iter().enumerate().filter(|&(_, &x)| x == b':') {
        assert!(i > 0, "component starts with a colon in {s:?}");
        assert_eq!(
            b.get(i + 1),
            Some(&b' '),
            "colon not followed by a space in {s:?}"
        );
        assert!(
            !(i == 1 && b[0].is_ascii_alphabetic()),
            "drive-letter form accepted in {s:?}"
        );
    }
}

fn check_invariants(p: &VaultPath) {
    let s = p.as_str();
    assert!(
        s.len() <= MAX_PATH_BYTES,
        "path over {MAX_PATH_BYTES} bytes"
    );
    assert!(!s.starts_with('/'), "absolute path accepted: {s:?}");

    let mut count = 0usize;
    for c in p.components() {
        count += 1;
        assert!(!c.is_empty(), "empty component in {s:?}");
        assert!(c != "." && c != "..", "dot component in {s:?}");
        assert!(!c.starts_with('.'), "hidden component in {s:?}");
        assert!(
            c.len() <= MAX_COMPONENT_BYTES,
            "component over {MAX_COMPONENT_BYTES} bytes"
        );
        for ch in c.chars() {
            assert!(ch != '\\', "backslash in {s:?}");
            assert!(!ch.is_control(), "control character in {s:?}");
        }
        check_colons(s, c);
    }
    // `components()` must not have hidden any empty piece of the text.
    let pieces = if s.is_empty() {
        0
    } else {
        s.split('/').count()
    };
    assert_eq!(count, pieces, "components() skipped part of {s:?}");

    let std_path = Path::new(s);
    assert!(std_path.is_relative(), "std sees an absolute path: {s:?}");
    let mut std_count = 0usize;
    for c in std_path.components() {
        std_count += 1;
        assert!(
            matches!(c, Component::Normal(_)),
            "std sees a non-normal component {c:?} in {s:?}"
        );
    }
    assert_eq!(std_count, count, "std and capvault split {s:?} differently");

    // The name helpers must not panic, and must return pieces of the last component.
    let name = p.file_name();
    assert!(s.ends_with(name));
    assert!(name.starts_with(p.stem()));
    if let Some(ext) = p.extension() {
        assert!(name.ends_with(ext));
    }
    assert!(p.starts_with(&VaultPath::root()));
    assert!(p.starts_with(p));
}
