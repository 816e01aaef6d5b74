//! Fuzzes the Dataview parser (`obsidian::dataview`) with arbitrary text (lossy UTF-8).
//!
//! It must not panic and must finish in time linear in the text; every line it reports must be
//! inside the note, every item's parent above it and its children below, a field's raw value a
//! piece of the text, and the counts within the per-note bounds. The same text is also read as
//! one field value and as one line of fields.

#![no_main]

use capvault::obsidian::dataview::{self, MAX_FIELDS, MAX_ITEMS, fields, tasks, value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    let lines = text.split('\n').count();
    let note = dataview::parse_note(text);
    let all_fields: Vec<&dataview::InlineField> = note
        .fields
        .iter()
        .chain(note.items.iter().flat_map(|i| &i.fields))
        .collect();
    assert!(all_fields.len() <= MAX_FIELDS);
    assert!(note.items.len() <= MAX_ITEMS);
    for f in &all_fields {
        assert!(f.line < lines, "{f:?}");
        assert!(!f.key.is_empty());
        // A list item's raw value may join its lines with spaces; the others are verbatim.
        if !f.raw.contains(' ') {
            assert!(text.contains(f.raw.as_str()), "{f:?}");
        }
    }
    for item in &note.items {
        assert!(item.line_count >= 1 && item.line + item.line_count <= lines, "{item:?}");
        assert!(item.parent.is_none_or(|p| p < item.line));
        assert!(item.children.iter().all(|&c| c > item.line && c < lines));
        assert!(item.children.windows(2).all(|w| w[0] < w[1]));
        if let Some(t) = item.task {
            assert!(!t.fully_completed || t.completed);
        }
    }
    let _ = note.page_fields();
    let _ = value::parse_inline_value(text);
    let raw = fields::extract_inline_fields(text, true);
    for pair in raw.windows(2) {
        assert!(pair[0].end < pair[1].start, "{pair:?}");
    }
    for f in &raw {
        assert!(f.start <= f.value.0 && f.value.0 <= f.value.1 && f.value.1 <= f.end);
        assert!(f.end <= text.len());
    }
    let _ = fields::extract_full_line_field(text);
    let _ = tasks::parse_tasks_fields(text);
});
