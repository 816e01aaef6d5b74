//! Fuzzes the ranked-search query parser and everything a query goes through after it: the
//! clause-to-index translation and search over a small index, the choice of the line a hit shows,
//! and (the same bytes as a regex) the regex compiler with its limits.
//!
//! Nothing may panic; a parsed query stays within its bounds; a search returns at most the
//! page asked for; match ranges lie inside their excerpt.

#![no_main]

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use capvault::index::query::{MAX_CLAUSES, parse};
use capvault::index::text::{self, Needles};
use capvault::index::{IndexFilter, SearchIndex};
use capvault::markdown::parse_note;
use capvault::model::NoteRead;
use capvault::notes::search::Matcher;
use capvault::vault::{FileMeta, VaultPath};
use libfuzzer_sys::fuzz_target;

const NOTES: &[(&str, &str)] = &[
    ("Garden/Plan.md", "---\ntags: [garden/beds]\naliases: [Plot]\n---\n# Plan\nsowing dates and compost\n"),
    ("中文.md", "# 笔记\n我爱北京天安门\n"),
    ("b.md", "Dates for sowing were late. #gardening\n```\n# not a heading\n```\ncafé naïve\n"),
];

fn index() -> &'static SearchIndex {
    static INDEX: OnceLock<SearchIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        let ix = SearchIndex::new(1).unwrap();
        for (i, (path, text)) in NOTES.iter().enumerate() {
            let path = VaultPath::parse(path).unwrap();
            let parsed = parse_note(text);
            let meta = FileMeta {
                size: text.len() as u64,
                modified: SystemTime::UNIX_EPOCH + Duration::from_secs(i as u64),
                ino: i as u64,
                nlink: 1,
                created: None,
            };
            ix.stage(NoteRead { path: &path, meta: &meta, text, parsed: &parsed }).unwrap();
        }
        ix.commit().unwrap();
        ix
    })
}

fuzz_target!(|data: &[u8]| {
    let input = String::from_utf8_lossy(data);
    if let Ok(q) = parse(&input) {
        assert!(!q.clauses.is_empty() && q.clauses.len() <= MAX_CLAUSES);
        if let Ok(found) = index().search(&q, &IndexFilter::default(), 0, 2) {
            assert!(found.hits.len() <= 2);
            assert!(found.total <= NOTES.len());
            let mut analyzer = text::analyzer();
            for (_, text) in NOTES {
                let shown = text::best_line(&mut analyzer, text, &found.needles);
                let len = shown.excerpt.chars().count();
                for [s, e] in shown.matches {
                    assert!(s < e && e <= len, "{s}..{e} outside {len}");
                }
            }
        }
    }
    // Arbitrary text as needles must not break the line picker either.
    let mut analyzer = text::analyzer();
    let needles = Needles {
        terms: text::tokens(&mut analyzer, &input).into_iter().map(|t| t.text).collect(),
        cjk: text::cjk_runs(&input).map(str::to_owned).collect(),
    };
    let _ = text::best_line(&mut analyzer, &input, &needles);
    // The same bytes as a regex: compiled under the limits or refused, never a panic.
    let _ = Matcher::regex(&input, false);
});
