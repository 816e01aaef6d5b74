//! Fuzzes the frontmatter reader: arbitrary bytes (lossy UTF-8) become the YAML of a
//! frontmatter block, `---\n<bytes>\n---\n`, followed by a small body.
//!
//! `parse_note` must not panic and must finish (libFuzzer's `-timeout` catches hangs; the
//! reader's limits keep alias bombs and deep nesting cheap). The block is always found, so the
//! result is `Valid` or `Invalid`, never `None`; a `Valid` value is a JSON object; an
//! `Invalid` error has the documented shape; link positions (frontmatter links included) hold
//! their `raw` text.

#![no_main]

use capvault::markdown::{Frontmatter, parse_note};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let yaml = String::from_utf8_lossy(data);
    let text = format!("---\n{yaml}\n---\n[[fuzz-body-link]]\n");
    let note = parse_note(&text);
    match &note.frontmatter {
        Frontmatter::Valid { value, end_line } => {
            for (key, v) in value.iter() {
                assert_eq!(value.get(key), Some(v), "property {key:?} is not found by its key");
            }
            assert!(value.to_value().is_object());
            assert!(*end_line >= 2);
        }
        Frontmatter::Invalid { error, end_line } => {
            assert!(error.starts_with("invalid frontmatter: "), "{error}");
            assert!(error.ends_with(')'), "{error}");
            assert!(*end_line >= 2);
        }
        Frontmatter::None => panic!("the frontmatter block was not found"),
    }
    for link in &note.links {
        let range = link.pos.range();
        assert!(range.start <= range.end && range.end <= text.len());
        assert_eq!(&text[range], &*link.raw);
    }
});
