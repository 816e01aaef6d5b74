//! The layers point one way. The order of the top-level modules is written once, in
//! `docs/architecture.md` (the `layers` block: top first, modules of one layer on one line).
//! Every `crate::<module>` path in a source file (tests inside the crate included, comments
//! excepted) must name its own module or one of a lower layer: never one above, never one
//! beside it. As clippy's disallowed-methods keeps the filesystem in `vault/`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

/// The layers of architecture.md, each module with its layer (0 at the bottom).
fn layers() -> Vec<(String, usize)> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    parse_layers(&doc)
}

/// The ```` ```layers ```` block of `doc`.
fn parse_layers(doc: &str) -> Vec<(String, usize)> {
    let start = doc
        .find("```layers\n")
        .expect("a ```layers block in architecture.md");
    let body = &doc[start + "```layers\n".len()..];
    let body = &body[..body.find("```").expect("the layers block ends")];
    let rows: Vec<&str> = body.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        for m in row.split_whitespace() {
            assert!(
                out.iter().all(|(n, _): &(String, usize)| n != m),
                "{m} is in two layers"
            );
            out.push((m.to_owned(), rows.len() - 1 - i));
        }
    }
    out
}

fn layer(layers: &[(String, usize)], module: &str) -> Option<usize> {
    layers.iter().find(|(m, _)| m == module).map(|(_, l)| *l)
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
            // `crate::{a, b}` would hide its modules from this check.
            assert!(
                !after.starts_with('{'),
                "name each module in its own path, not `{prefix}{{...}}`: {line}"
            );
            out.push(name);
            rest = after;
        }
    }
    out
}

/// Every reference in the crate to a module above or beside its own: (file:line, from, to).
fn bad_references(src: &Path, layers: &[(String, usize)]) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
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
        let Some(from) = layer(layers, module) else {
            panic!(
                "{}: a top-level module with no layer; add it to the layers block of \
                 docs/architecture.md",
                rel.display()
            );
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for to in named_modules(line) {
                if to != module
                    && let Some(l) = layer(layers, &to)
                    && l >= from
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
fn no_module_imports_a_layer_above_or_beside_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = layers();
    let bad = bad_references(&src, &layers);
    assert!(
        bad.is_empty(),
        "imports that point up or sideways (docs/architecture.md, Layers):\n{}",
        bad.iter()
            .map(|(at, from, to)| format!("  {at}: {from} uses {to}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_check_sees_upward_and_sideways_imports() {
    let layers = parse_layers("text\n```layers\nnotes\nindex model\nvault\n```\nmore ```\n");
    assert_eq!(
        layers,
        [
            ("notes".to_owned(), 2),
            ("index".to_owned(), 1),
            ("model".to_owned(), 1),
            ("vault".to_owned(), 0)
        ]
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("index")).unwrap();
    std::fs::write(
        tmp.path().join("index/mod.rs"),
        "//! uses crate::notes in a comment only\nuse crate::vault::VaultPath;\nfn f() { crate::notes::filter::x(); }\nuse crate::index::Own;\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("model.rs"), "use crate::index::Index;\n").unwrap();
    std::fs::write(tmp.path().join("notes.rs"), "use crate::model::Model;\n").unwrap();
    let bad = bad_references(tmp.path(), &layers);
    assert_eq!(
        bad,
        [
            (
                "index/mod.rs:3".to_owned(),
                "index".to_owned(),
                "notes".to_owned()
            ),
            (
                "model.rs:1".to_owned(),
                "model".to_owned(),
                "index".to_owned()
            )
        ]
    );
}

/// The places under `src` (as `file:line`) that claim the authority over host paths
/// (`Host::claim`, or any `::claim` path), main.rs and test modules excepted (the code after a
/// file's first `#[cfg(test)]`), comments ignored.
fn host_claims(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == "main.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.trim() == "#[cfg(test)]" {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            let claims = code.match_indices("::claim").any(|(at, m)| {
                !code[at + m.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if claims {
                found.push(format!("{rel}:{}", i + 1));
            }
        }
    }
    found
}

#[test]
fn only_main_claims_the_authority_over_host_paths() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let main = std::fs::read_to_string(src.join("main.rs")).unwrap();
    assert_eq!(
        main.lines()
            .filter(|l| l.split("//").next().unwrap_or("").contains("Host::claim("))
            .count(),
        1,
        "src/main.rs claims the Host once and passes &Host down"
    );
    let others = host_claims(&src);
    assert!(
        others.is_empty(),
        "Host::claim is called outside src/main.rs (take a &Host instead): {others:?}"
    );
}

#[test]
fn the_check_sees_a_host_claimed_outside_main() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("app")).unwrap();
    std::fs::write(
        tmp.path().join("main.rs"),
        "fn main() { let h = Host::claim(); }\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("app/serve.rs"),
        "//! Host::claim() in a comment only\nfn f() {\n    let h = crate::vault::host::Host::claim(); // here\n    let g = H::claim;\n    x.claimed();\n}\n#[cfg(test)]\nmod tests { fn t() { Host::claim(); } }\n",
    )
    .unwrap();
    assert_eq!(
        host_claims(tmp.path()),
        ["app/serve.rs:3", "app/serve.rs:4"]
    );
}
