//! Fuzzes the hidden-text scanner (issue 38) on hostile note text: the spans of
//! `markdown::hidden_spans` lie on character boundaries inside the text, at most
//! `MAX_SPANS` of them are kept, the summary's counts add up to the total and list at most
//! `MAX_LINES_PER_KIND` lines each, and every policy applied to any part of the text returns
//! without panicking: `show` gives that part unchanged, `mark` and `strip` leave no hidden
//! character unmarked.
//!
//! The same text as a string of a reply (`markdown::hidden_in_json`) is shown exactly as
//! `apply` shows the whole text, and counted the same.
//!
//! The first byte chooses where the part read starts; the rest is the note.

#![no_main]

use capvault::markdown::hidden::{self, HiddenKind, Policy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let spans = capvault::markdown::hidden_spans(&text);
    assert!(spans.spans.len() <= hidden::MAX_SPANS);
    for s in &spans.spans {
        assert!(s.start <= s.end && s.end <= text.len(), "{s:?}");
        assert!(text.is_char_boundary(s.start) && text.is_char_boundary(s.end));
    }
    if let Some(summary) = hidden::Hidden::of(&text, &spans) {
        let counted: usize = summary.kinds.iter().map(|k| k.count).sum();
        assert_eq!(counted, spans.total());
        assert!(
            summary
                .kinds
                .iter()
                .all(|k| k.lines.len() <= hidden::MAX_LINES_PER_KIND)
        );
    }
    // The marker check a write under `mark` runs on any text: it ends, and what it finds is
    // in the text.
    if let Some(m) = hidden::first_marker(&text) {
        assert!(text.contains(m));
    }
    let mut from = (usize::from(cut) * text.len()) / 256;
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    assert_eq!(
        hidden::apply(&text, from..text.len(), &spans, Policy::Show),
        &text[from..]
    );
    for policy in [Policy::Mark, Policy::Strip] {
        let out = hidden::apply(&text, from..text.len(), &spans, policy);
        if from == 0 {
            let again = capvault::markdown::hidden_spans(&out);
            assert!(
                !again.spans.iter().any(|s| matches!(
                    s.kind,
                    HiddenKind::Invisible | HiddenKind::Bidi | HiddenKind::TagCharacters
                )),
                "{policy:?}: {out:?}"
            );
        }
    }
    // The same text as strings of a reply (a query row, a property): each is shown as the
    // policy says, the keys skipped are left alone, and the counts are the text's own.
    for policy in [Policy::Show, Policy::Mark, Policy::Strip] {
        let mut reply = serde_json::json!({"rows": [[text.as_ref()]], "path": text.as_ref()});
        let mut counts = std::collections::BTreeMap::new();
        capvault::markdown::hidden_in_json(&mut reply, policy, &["path"], &mut counts);
        assert_eq!(reply["path"].as_str(), Some(text.as_ref()));
        let want = hidden::apply(&text, 0..text.len(), &spans, policy);
        assert_eq!(reply["rows"][0][0].as_str(), Some(want.as_str()), "{policy:?}");
        assert_eq!(counts.values().sum::<usize>(), spans.total());
    }
});
