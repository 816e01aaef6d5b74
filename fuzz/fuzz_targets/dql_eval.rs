//! Fuzzes the DQL evaluator (`obsidian::dataview::query`): arbitrary text as a query and as an
//! inline expression over a small fixed vault, under a small step budget and a byte cap.
//!
//! It must not panic, must stop within the budget (a hostile query ends with an error), must
//! never charge past its bytes (CI runs it with libFuzzer's `-malloc_limit_mb`, so a value
//! built past the cap aborts the run), and an answer's rows must agree with its count; its
//! Markdown must render.

#![no_main]

use std::sync::OnceLock;

use capvault::obsidian::dataview::query::{self, Budget, Context, DvSource, Output, PageId};
use capvault::obsidian::dataview::{DataviewNote, Link, parse_note};
use chrono::NaiveDate;
use libfuzzer_sys::fuzz_target;

struct Vault {
    pages: Vec<(String, DataviewNote, serde_json::Value, Vec<String>, Vec<Link>)>,
}

const NOTES: [(&str, &str); 4] = [
    (
        "Games/Elden Ring.md",
        "---\ntype: rpg\nprice: 60\ntags: [games/crpg]\nstarted: 2024-02-01\n---\nrating:: 9\n- [ ] beat boss [due:: 2024-05-10]\n    - [x] level up ✅ 2024-05-01\n",
    ),
    ("Games/Tetris.md", "---\ntype: puzzle\nprice: 5\n---\nrating:: 7\n#games\n"),
    ("Dashboard.md", "Links: [[Elden Ring]], [[Tetris]]\n- item (k:: v)\n"),
    ("Daily/2024-05-14.md", "- [ ] call #shopping\n"),
];

fn vault() -> &'static Vault {
    static V: OnceLock<Vault> = OnceLock::new();
    V.get_or_init(|| Vault {
        pages: NOTES
            .iter()
            .map(|(path, text)| {
                let note = parse_note(text);
                let fm = serde_json::Value::Object(
                    note.frontmatter
                        .iter()
                        .map(|(k, _)| (k.clone(), serde_json::Value::Bool(true)))
                        .collect(),
                );
                let tags = vec!["#games/crpg".to_owned(), "#shopping".to_owned()];
                let links = vec![Link {
                    path: "Elden Ring".into(),
                    subpath: None,
                    display: None,
                    embed: false,
                }];
                ((*path).to_owned(), note, fm, tags, links)
            })
            .collect(),
    })
}

impl DvSource for Vault {
    fn pages(&self) -> Vec<PageId> {
        (0..self.pages.len()).collect()
    }
    fn path(&self, p: PageId) -> &str {
        &self.pages[p].0
    }
    fn size(&self, p: PageId) -> u64 {
        p as u64 * 10
    }
    fn mtime(&self, _p: PageId) -> Option<chrono::NaiveDateTime> {
        NaiveDate::from_ymd_opt(2024, 5, 1).and_then(|d| d.and_hms_opt(9, 0, 0))
    }
    fn ctime(&self, _p: PageId) -> Option<chrono::NaiveDateTime> {
        None
    }
    fn frontmatter(&self, p: PageId) -> Option<&serde_json::Value> {
        Some(&self.pages[p].2)
    }
    fn note(&self, p: PageId) -> Option<&DataviewNote> {
        Some(&self.pages[p].1)
    }
    fn tags(&self, p: PageId) -> Vec<String> {
        self.pages[p].3.clone()
    }
    fn outlinks(&self, p: PageId) -> Vec<Link> {
        self.pages[p].4.clone()
    }
    fn resolve(&self, target: &str, _from: Option<PageId>) -> Option<PageId> {
        self.pages
            .iter()
            .position(|(path, ..)| path.trim_end_matches(".md").ends_with(target))
    }
    fn inlinks(&self, p: PageId) -> Vec<PageId> {
        if p == 0 { vec![2] } else { Vec::new() }
    }
}

/// The byte cap of one evaluation.
const BYTES: u64 = 32 << 20;

fn ctx() -> Context {
    let now = NaiveDate::from_ymd_opt(2024, 5, 15)
        .and_then(|d| d.and_hms_opt(14, 30, 0))
        .unwrap_or_default();
    let mut c = Context::new(now);
    c.this = Some(2);
    c.budget = Budget::with(200_000, std::time::Duration::from_secs(5))
        .max_bytes(BYTES)
        .into();
    c.max_rows = 2_000;
    c
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    let v = vault();
    let c = ctx();
    if let Ok(r) = query::execute(text, v, &c) {
        let rows = match &r.output {
            Output::List { rows, .. } => rows.len(),
            Output::Table { rows, columns, .. } => {
                assert!(rows.iter().all(|r| r.len() == columns.len()));
                rows.len()
            }
            Output::Task { groups } => {
                assert!(!r.grouped || groups.len() == r.count);
                r.count
            }
            Output::Calendar { entries } => {
                assert!(entries.len() <= r.count);
                r.count
            }
        };
        assert_eq!(rows, r.count);
        let _ = r.to_markdown(&c.settings);
    }
    assert!(c.budget.used() <= 200_000 + 1_000_000, "budget overrun: {}", c.budget.used());
    assert!(c.budget.bytes_used() <= BYTES, "bytes overrun: {}", c.budget.bytes_used());
    let c = ctx();
    let _ = query::evaluate_inline(text, None, v, &c);
});
