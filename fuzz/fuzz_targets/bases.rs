//! Fuzzes the Bases reader and evaluator: the input is either an expression (first byte 0) or
//! the YAML of a `.base` file, evaluated against a small fixed vault within a small budget.
//!
//! It may never panic, and must stay within its budget: a query either finishes or stops with
//! the budget error, and every row it returns passed the filters of a vault that has three files.

#![no_main]

use std::sync::Arc;
use std::time::Duration;

use capvault::obsidian::bases::eval::{Evaluator, PropertyType, SourceLink};
use capvault::obsidian::bases::{Budget, FileRef, Source, expr, parse_base, run};
use chrono::NaiveDateTime;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

struct Tiny {
    props: Vec<serde_json::Map<String, Value>>,
}

const PATHS: [&str; 3] = ["A.md", "folder/B.md", "img.png"];

impl Source for Tiny {
    fn path(&self, f: FileRef) -> &str {
        PATHS.get(f.0 as usize).copied().unwrap_or("")
    }
    fn size(&self, f: FileRef) -> u64 {
        u64::from(f.0) * 100
    }
    fn mtime(&self, _: FileRef) -> Option<NaiveDateTime> {
        chrono::DateTime::from_timestamp(1_700_000_000, 0).map(|t| t.naive_utc())
    }
    fn ctime(&self, f: FileRef) -> Option<NaiveDateTime> {
        self.mtime(f)
    }
    fn property(&self, f: FileRef, key: &str) -> Option<&Value> {
        self.props.get(f.0 as usize)?.get(key)
    }
    fn properties(&self, f: FileRef) -> Vec<(&str, &Value)> {
        self.props
            .get(f.0 as usize)
            .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
            .unwrap_or_default()
    }
    fn property_type(&self, key: &str) -> Option<PropertyType> {
        (key == "when").then_some(PropertyType::Date)
    }
    fn tags(&self, f: FileRef) -> Vec<Arc<str>> {
        if f.0 == 0 { vec!["a/b".into()] } else { Vec::new() }
    }
    fn links(&self, f: FileRef, embeds: bool) -> Vec<SourceLink> {
        if f.0 == 0 && !embeds {
            vec![SourceLink { target: "B".into(), display: None, file: Some(FileRef(1)) }]
        } else {
            Vec::new()
        }
    }
    fn links_to(&self, f: FileRef, to: FileRef) -> bool {
        f.0 == 0 && to.0 == 1
    }
    fn backlinks(&self, f: FileRef) -> Vec<FileRef> {
        if f.0 == 1 { vec![FileRef(0)] } else { Vec::new() }
    }
    fn resolve(&self, target: &str, _: Option<FileRef>) -> Option<FileRef> {
        match target {
            "A" => Some(FileRef(0)),
            "B" | "folder/B" => Some(FileRef(1)),
            _ => None,
        }
    }
    fn by_path(&self, path: &str) -> Option<FileRef> {
        PATHS.iter().position(|p| *p == path).map(|i| FileRef(i as u32))
    }
    fn now(&self) -> NaiveDateTime {
        chrono::DateTime::from_timestamp(1_750_000_000, 0).map_or_else(Default::default, |t| t.naive_utc())
    }
}

fn tiny() -> Tiny {
    let to_map = |v: Value| v.as_object().cloned().unwrap_or_default();
    Tiny {
        props: vec![
            to_map(json!({"rating": 4, "when": "2024-01-02", "list": [1, "x", "[[B]]"], "o": {"k": 1}})),
            to_map(json!({"rating": "high", "when": "[[A]]"})),
            to_map(json!({})),
        ],
    }
}

const STEPS: u64 = 200_000;
/// The byte cap of one evaluation (CI runs this target under libFuzzer's malloc limit).
const BYTES: u64 = 32 << 20;

fuzz_target!(|data: &[u8]| {
    let src = tiny();
    let files = [FileRef(0), FileRef(1), FileRef(2)];
    if let Some((0, rest)) = data.split_first() {
        let text = String::from_utf8_lossy(rest);
        let Ok(e) = expr::parse(&text) else { return };
        let budget = Budget::with(STEPS, Duration::from_secs(2)).max_bytes(BYTES);
        let formulas = Vec::new();
        let mut ev = Evaluator::new(&src, &formulas, &budget, Some(FileRef(0)));
        for f in files {
            ev.set_row(Some(f));
            let _ = ev.eval(&e);
        }
        // One charge may go over by at most a list's length.
        assert!(budget.used() <= STEPS + 200_000);
        assert!(budget.bytes_used() <= BYTES);
        return;
    }
    let text = String::from_utf8_lossy(data);
    let Ok(base) = parse_base(&text) else { return };
    assert!(!base.views.is_empty());
    for view in &base.views {
        let budget = Budget::with(STEPS, Duration::from_secs(2)).max_bytes(BYTES);
        if let Ok(out) = run(&base, view, &src, &files, Some(FileRef(0)), &budget, 0..usize::MAX) {
            assert!(out.rows.len() == out.total && out.total <= out.matched && out.matched <= files.len());
            assert!(out.rows.iter().all(|r| r.cells.len() == out.columns.len()));
            let grouped: usize = out.groups.iter().map(|g| g.len).sum();
            assert!(out.groups.is_empty() || grouped == out.total);
        }
    }
});
