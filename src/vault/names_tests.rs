//! Test-only module (declared under `#[cfg(test)]`, on every platform): names that a platform's
//! filesystem opens as another file. Linux opens a name as its bytes; macOS and Windows match
//! letter case loosely, macOS matches Unicode normalisation loosely, and Windows also reads short
//! (8.3) names, drops trailing dots and spaces, and opens devices. None of these may lead to a
//! hidden or excluded file, nor hang on a device. On Linux every row simply names nothing, and
//! under Wine (Linux's files underneath) the rows are not reached either: they earn their keep on
//! GitHub's macOS and Windows runners. What proves the Windows rules here is
//! `vault::path`'s `windows_aliases_are_refused_on_windows_only`, which fails under Wine when
//! they are removed.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use super::{Exclusions, Limits, Vault, VaultPath};

const HIDDEN: &str = "NAMES-HIDDEN-SECRET-41c2";
const EXCLUDED: &str = "NAMES-EXCLUDED-SECRET-9e07";

/// "Privé" with a precomposed é (U+00E9), as the exclusion is written.
const PRIVE: &str = "Priv\u{e9}";

#[test]
fn names_a_platform_reads_as_another_file_never_reach_a_hidden_or_excluded_one() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path();
    for (path, text) in [
        (".obsidian/app.json", HIDDEN),
        (".git/config", HIDDEN),
        ("Private/diary.md", EXCLUDED),
        (&format!("{PRIVE}/diary.md"), EXCLUDED),
        ("ok.md", "an ordinary note"),
    ] {
        let full = v.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    let exclusions = Exclusions::new(&["Private".to_owned(), PRIVE.to_owned()]).unwrap();
    let vault = Vault::open(v, Limits::default())
        .unwrap()
        .with_exclusions(exclusions);

    // The harness reads what it should.
    let ok = vault
        .read_file(&VaultPath::parse("ok.md").unwrap())
        .unwrap();
    assert_eq!(ok.bytes, b"an ordinary note");

    let rows = [
        ("OBSIDI~1/app.json", "the hidden folder by its short name"),
        ("obsidi~1/app.json", "the short name in lower case"),
        ("GIT~1/config", "the git folder by its short name"),
        ("private/diary.md", "the excluded folder in lower case"),
        ("PRIVATE/diary.md", "the excluded folder in upper case"),
        ("PRIVAT~1/diary.md", "the excluded folder by its short name"),
        (
            "Private./diary.md",
            "the excluded folder with a trailing dot",
        ),
        (
            "Private /diary.md",
            "the excluded folder with a trailing space",
        ),
        ("Private. ./diary.md", "trailing dots and spaces together"),
        ("Prive\u{301}/diary.md", "the excluded folder, decomposed é"),
        ("PRIVE\u{301}/diary.md", "decomposed and upper case"),
        ("Private/diary.md::$DATA", "the file's data stream"),
        ("CON", "the console device (would wait for input)"),
        ("nul.md", "the null device with an extension"),
        ("CONIN$", "the console's input"),
        ("COM1.md", "a serial port"),
    ];
    for (row, what) in rows {
        let Ok(path) = VaultPath::parse(row) else {
            continue; // refused at the boundary: the strongest answer
        };
        match vault.read_file(&path) {
            Err(_) => {}
            Ok(data) => panic!(
                "{what} ({row:?}) was read: {:?}",
                String::from_utf8_lossy(&data.bytes)
            ),
        }
    }
}
