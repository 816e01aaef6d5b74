//! Fuzzes `parse_note` with arbitrary text (lossy UTF-8).
//!
//! It must not panic and must finish, and every position it reports must be sound: `start <=
//! end <= len`, both on char boundaries, line and column (1-based, in chars) agreeing with the
//! byte offset, a link's `raw` equal to the text at its position, a block id's position
//! holding `^id`, an inline tag's position holding `#name`. Its cost is bounded: the links' source
//! text kept is at most 4 times the note (links nest at most 4 deep), and the distinct tags are
//! each normalised form once.

#![no_main]

use capvault::markdown::{Frontmatter, Pos, TagSource, parse_note};
use libfuzzer_sys::fuzz_target;

fn check_pos(text: &str, pos: &Pos) {
    let range = pos.range();
    assert!(
        range.start <= range.end && range.end <= text.len(),
        "{pos:?}"
    );
    assert!(
        text.is_char_boundary(range.start) && text.is_char_boundary(range.end),
        "{pos:?} not on char boundaries"
    );
    let before = &text[..range.start];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..range.start].chars().count() + 1;
    assert_eq!(
        (pos.line as usize, pos.column as usize),
        (line, column),
        "{pos:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    let note = parse_note(text);
    for link in &note.links {
        check_pos(text, &link.pos);
        assert_eq!(&text[link.pos.range()], &*link.raw);
    }
    let kept: usize = note.links.iter().map(|l| l.raw.len()).sum();
    assert!(kept <= 4 * text.len(), "{kept} bytes of link source");
    let distinct = note.distinct_tags();
    let norms: std::collections::HashSet<&str> = distinct.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(norms.len(), distinct.len());
    for tag in &note.tags {
        assert!(norms.contains(capvault::markdown::normalize_tag(&tag.name).as_str()));
    }
    for tag in &note.tags {
        check_pos(text, &tag.pos);
        assert!(!tag.name.is_empty());
        if tag.source == TagSource::Inline {
            // (A frontmatter tag written with YAML escapes points at its whole scalar.)
            assert_eq!(&text[tag.pos.range()], format!("#{}", tag.name));
        }
    }
    for heading in &note.headings {
        check_pos(text, &heading.pos);
        assert!((1..=6).contains(&heading.level));
    }
    for block in &note.block_ids {
        check_pos(text, &block.pos);
        assert_eq!(&text[block.pos.range()], format!("^{}", block.id));
    }
    if let Frontmatter::Valid { value, .. } = &note.frontmatter {
        // Keys sorted and unique: every key finds its own value.
        for (key, v) in value.iter() {
            assert_eq!(value.get(key), Some(v), "property {key:?}");
        }
    }
});
