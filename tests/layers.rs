//! The layers point one way: `server → notes → engine → {index, model} → {markdown, obsidian}
//! → vault` (`locks` beside `vault`; `app`, `demo` and `main` on top). Every `crate::<module>` path
//! in a source file (tests inside the crate included, comments excepted) must name a module of
//! its own layer or a lower one, as clippy's disallowed-methods keeps the filesystem in `vault/`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

/// Each top-level module and its layer (higher may use lower).
const LAYERS: &[(&str, u8)] = &[
    ("vault", 0),
    ("locks", 0),
    ("markdown", 1),
    ("obsidian", 1),
    ("net", 1),
    ("index", 2),
    ("model", 2),
    ("semantic", 2),
    ("engine", 3),
    ("notes", 4),
    ("server", 5),
    ("app", 6),
    ("http", 6),
    ("demo", 6),
    ("config", 6),
    ("setup", 6),
    ("main", 7),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The modules `line` names as `crate::<m>` (or `capvault::<m>` from the binary).
fn named_modules(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut out = Vec::new();
    for prefix in ["crate::", "capvault::"] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let after = &rest[i + prefix.len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
            rest = after;
        }
    }
    out
}

/// Every upward reference in the crate: (file:line, from, to).
fn upward_references(src: &Path) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let module = first.trim_end_matches(".rs");
        if module == "lib" {
            continue;
        }
        let Some(from) = layer(module) else {
            panic!(
                "{}: a top-level module with no layer; add it to LAYERS",
                rel.display()
            );
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for to in named_modules(line) {
                if let Some(l) = layer(&to)
                    && l > from
                {
                    bad.push((
                        format!("{}:{}", rel.display(), n + 1),
                        module.to_owned(),
                        to,
                    ));
                }
            }
        }
    }
    bad
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = upward_references(&src);
    assert!(
        bad.is_empty(),
        "upward imports (layers: {LAYERS:?}):\n{}",
        bad.iter()
            .map(|(at, from, to)| format!("  {at}: {from} uses {to}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("index")).unwrap();
    std::fs::write(
        tmp.path().join("index/mod.rs"),
        "//! uses crate::notes in a comment only\nuse crate::vault::VaultPath;\nfn f() { crate::notes::filter::x(); }\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("engine.rs"), "use crate::model::Model;\n").unwrap();
    let bad = upward_references(tmp.path());
    assert_eq!(
        bad,
        [(
            "index/mod.rs:3".to_owned(),
            "index".to_owned(),
            "notes".to_owned()
        )]
    );
}
