//! Fuzzes the DQL parser (`obsidian::dataview::query`) with arbitrary text (lossy UTF-8), as a
//! query, a code block of either language, and an expression.
//!
//! It must not panic or overflow the stack, must finish in time linear in the text, and every
//! error must point inside the text with a line and column that match its byte offset.

#![no_main]

use capvault::obsidian::dataview::query::{self, ParseError};
use libfuzzer_sys::fuzz_target;

fn check(text: &str, e: &ParseError) {
    assert!(e.offset <= text.len(), "{e:?}");
    let before = &text[..text.floor_char_boundary(e.offset)];
    assert_eq!(e.line, before.matches('\n').count() + 1, "{e:?}");
    assert!(e.column >= 1);
    assert!(!e.message.is_empty());
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    if let Err(e) = query::parse_query(text) {
        check(text, &e);
    }
    if let Err(e) = query::parse_expression(text) {
        check(text, &e);
    }
    assert!(query::parse_block("dataviewjs", text).is_err());
});
