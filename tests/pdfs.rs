//! PDFs through the real binary over stdio: `read_attachment` sends a PDF's text page by page
//! (the pages asked for, within the reply's bound, with the page count and sha256); a hostile
//! PDF (garbage, cut, nested past any stack, an inflate bomb) is reported and never takes the
//! server or its PDF worker down; `--index-pdfs` makes search cover the PDFs' text, hits naming
//! the page, following edits and deletions, and kept with the index cache across a restart;
//! ranked search's all-words rule covers pages and notes alike; a one-shot `capvault call`
//! waits (bounded) for the PDFs or says it did not; slow PDFs, indexed or asked for, never hold
//! up a quick one asked for, and one given up at shutdown is read again at the next start.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use capvault::media::pdf::sample_pdf;
use serde_json::{Value, json};

use crate::common::{Server, sha256_hex as sha, write_tree};

/// The text blocks of a reply after the structured one.
fn texts_of(raw: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(raw).unwrap();
    v["content"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .filter(|c| c["type"] == "text")
        .map(|c| c["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The bytes of an embedded resource in a reply.
fn resource_of(raw: &str) -> Option<Vec<u8>> {
    let v: Value = serde_json::from_str(raw).unwrap();
    v["content"].as_array().unwrap().iter().find_map(|c| {
        (c["type"] == "resource").then(|| {
            STANDARD
                .decode(c["resource"]["blob"].as_str().unwrap())
                .unwrap()
        })
    })
}

include!("common/zlib.rs");

/// A PDF made of `objects` (1 is the catalog), with a correct cross-reference table.
fn pdf_of(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    let n = objects.len() + 1;
    out.extend_from_slice(format!("xref\n0 {n}\n0000000000 65535 f \n").as_bytes());
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {n} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n").as_bytes(),
    );
    out
}

/// A one-page PDF whose content stream is `stream` (with `filter`, e.g. `/FlateDecode`) and
/// whose page's annotations are the object `annots`.
fn pdf_with(stream: &[u8], filter: &str, annots: &[u8]) -> Vec<u8> {
    let mut content = format!("<< /Length {} {filter} >>\nstream\n", stream.len()).into_bytes();
    content.extend_from_slice(stream);
    content.extend_from_slice(b"\nendstream");
    pdf_of(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Annots 5 0 R >>"
            .to_vec(),
        content,
        annots.to_vec(),
    ])
}

/// A one-page PDF that takes minutes to read and is a few KB: its page draws a form that draws
/// the next form ten times, eight levels deep (10^8 drawings), so the worker's time bound stops
/// it.
fn slow_pdf() -> Vec<u8> {
    const DEPTH: usize = 8;
    let stream = |dict: &str, content: &[u8]| {
        let mut s = format!("<< {dict} /Length {} >>\nstream\n", content.len()).into_bytes();
        s.extend_from_slice(content);
        s.extend_from_slice(b"\nendstream");
        s
    };
    let names: String = (0..DEPTH)
        .map(|k| format!("/F{k} {} 0 R ", 5 + k))
        .collect();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
             /Resources << /XObject << {names}>> >> >>"
        )
        .into_bytes(),
        stream("", "/F0 Do ".repeat(10).as_bytes()),
    ];
    for k in 0..DEPTH {
        let content = if k + 1 < DEPTH {
            format!("/F{} Do ", k + 1).repeat(10)
        } else {
            "0 0 m 1 1 l S".to_owned()
        };
        objects.push(stream(
            "/Type /XObject /Subtype /Form /BBox [0 0 1 1]",
            content.as_bytes(),
        ));
    }
    pdf_of(&objects)
}

/// `capvault call VAULT ARGS...` as a person runs it (the test cache folder, no user config):
/// (whether it succeeded, stdout, stderr).
fn call(vault: &Path, args: &[&str]) -> (bool, String, String) {
    let o = crate::common::capvault()
        .arg("call")
        .arg(vault)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The JSON document a `capvault call` printed first.
fn json_of(stdout: &str) -> Value {
    serde_json::Deserializer::from_str(stdout)
        .into_iter::<Value>()
        .next()
        .unwrap()
        .unwrap()
}

fn vault(dir: &Path) {
    write_tree(
        dir,
        &[
            ("Zebra crossing.md", "A note about a zebra crossing.\n"),
            ("Tagged.md", "#animals\nzebra zebra zebra\n"),
        ],
    );
    let write = |name: &str, bytes: Vec<u8>| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    write(
        "Docs/plan.pdf",
        sample_pdf(&[
            "Budget overview\nNothing to see",
            "The zebra migration starts in May\nand the zebra herd returns in June",
            "Appendix: zebra notes",
        ]),
    );
    write("Docs/scan.pdf", sample_pdf(&["", ""]));
    write("Other/report.pdf", sample_pdf(&["Quarterly revenue grew"]));
    write(".hidden/secret.pdf", sample_pdf(&["zebra secrets"]));
}

#[tokio::test]
async fn a_pdf_is_read_as_text_page_by_page_with_its_facts() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let bytes = std::fs::read(tmp.path().join("Docs/plan.pdf")).unwrap();
    let s = Server::start(tmp.path()).await;

    let r = s.call("read_attachment", json!({"path": "plan.pdf"})).await;
    assert!(!r.is_error, "{}", r.raw);
    let info = &r.structured;
    assert_eq!(info["path"], "Docs/plan.pdf");
    assert_eq!(info["sha256"], sha(&bytes));
    assert_eq!(info["sent_as"], "text");
    assert_eq!(info["pdf"]["page_count"], 3);
    assert_eq!(info["pdf"]["pages_sent"], "1-3");
    assert_eq!(info["pdf"]["has_text"], true);
    let text = texts_of(&r.raw).join("\n");
    let (p1, p2, p3) = (
        text.find("[page 1 of 3]\nBudget overview").expect(&text),
        text.find("[page 2 of 3]\nThe zebra migration starts in May")
            .expect(&text),
        text.find("[page 3 of 3]\nAppendix: zebra notes")
            .expect(&text),
    );
    assert!(p1 < p2 && p2 < p3, "pages in order: {text}");
    assert!(
        resource_of(&r.raw).is_none(),
        "text only, no bytes beside it"
    );

    // The pages asked for, and only those.
    let r = s
        .call(
            "read_attachment",
            json!({"path": "Docs/plan.pdf", "pages": "3,1"}),
        )
        .await;
    assert_eq!(r.structured["pdf"]["pages_sent"], "1,3");
    let text = texts_of(&r.raw).join("\n");
    assert!(
        text.contains("Budget overview") && text.contains("Appendix"),
        "{text}"
    );
    assert!(!text.contains("migration"), "{text}");
    let r = s
        .call(
            "read_attachment",
            json!({"path": "plan.pdf", "pages": "7-9"}),
        )
        .await;
    assert_eq!(r.structured["pdf"]["pages_sent"], "");
    assert!(texts_of(&r.raw)[0].contains("No page of this PDF is in `pages` (it has 3)"));
    for bad in ["0", "x", "3-1", "1,,2"] {
        let e = s
            .err("read_attachment", json!({"path": "plan.pdf", "pages": bad}))
            .await;
        assert!(
            e.contains("invalid_argument") && e.contains("`pages`"),
            "{bad}: {e}"
        );
    }
    let e = s
        .err(
            "read_attachment",
            json!({"path": "Zebra crossing.md", "pages": "1"}),
        )
        .await;
    assert!(e.contains("not a PDF"), "{e}");

    // `original`: the bytes themselves.
    let r = s
        .call(
            "read_attachment",
            json!({"path": "plan.pdf", "format": "original"}),
        )
        .await;
    assert_eq!(resource_of(&r.raw).unwrap(), bytes);
    assert!(r.structured.get("pdf").is_none());

    // A PDF without a text layer says so.
    let r = s.call("read_attachment", json!({"path": "scan.pdf"})).await;
    assert_eq!(r.structured["pdf"]["has_text"], false);
    assert_eq!(r.structured["pdf"]["page_count"], 2);
    assert!(texts_of(&r.raw)[0].contains("no text layer"), "{}", r.raw);
    s.stop().await;
}

#[tokio::test]
async fn hostile_pdfs_are_reported_and_the_worker_keeps_reading() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let good = sample_pdf(&["still readable"]);
    let cut = &good[..good.len() / 3];
    // A page's object nested deeper than any parser's stack, as an array and as dictionaries.
    let text = b"BT /F1 12 Tf 72 720 Td (hello) Tj ET";
    let deep_array = [vec![b'['; 400_000], vec![b']'; 400_000]].concat();
    let nested = pdf_with(text, "", &deep_array);
    let deep_dict = ["<< /A ".repeat(100_000), "1".into(), " >>".repeat(100_000)].concat();
    let nested_dict = pdf_with(text, "", deep_dict.as_bytes());
    // A page whose content inflates to 900 MB of zeros (under 1 MB on disk).
    let bomb = pdf_with(&zlib_zeros(900_000_000), "/Filter /FlateDecode", b"[]");
    assert!(bomb.len() < 6 << 20, "within the bound for sending a file");
    for (name, bytes) in [
        ("garbage.pdf", b"this is not a PDF".to_vec()),
        ("cut.pdf", cut.to_vec()),
        ("nested.pdf", nested),
        ("nested_dict.pdf", nested_dict),
        ("bomb.pdf", bomb),
        ("good.pdf", good.clone()),
    ] {
        std::fs::write(tmp.path().join(name), bytes).unwrap();
    }
    let s = Server::start(tmp.path()).await;
    for name in [
        "garbage.pdf",
        "cut.pdf",
        "nested.pdf",
        "nested_dict.pdf",
        "bomb.pdf",
    ] {
        let started = std::time::Instant::now();
        let r = s.call("read_attachment", json!({"path": name})).await;
        assert!(!r.is_error, "{name}: {}", r.raw);
        let why = r.structured["pdf_error"].as_str().unwrap_or_default();
        assert!(
            why.contains("not a readable PDF")
                || why.contains("ran out of memory")
                || why.contains("took longer")
                || why.contains("stopped"),
            "{name}: the reason is shown: {}",
            r.raw
        );
        assert!(
            !why.contains(tmp.path().to_str().unwrap()),
            "no host path in {why}"
        );
        assert_eq!(r.structured["sent_as"], "resource", "{name}: its bytes");
        if name == "bomb.pdf" {
            assert!(
                why.contains("ran out of memory") || why.contains("took longer"),
                "the bomb is stopped by a bound: {why}"
            );
        }
        assert!(started.elapsed().as_secs() < 25, "{name}: bounded in time");
        // The worker still reads the next PDF.
        let r = s.call("read_attachment", json!({"path": "good.pdf"})).await;
        assert!(
            texts_of(&r.raw).join("").contains("still readable"),
            "after {name}: {}",
            r.raw
        );
    }
    s.stop().await;
}

/// Waits until the PDFs' first pass is done; returns `vault_info`'s `pdfs`.
async fn pdfs_ready(s: &Server) -> Value {
    s.wait_index_ready().await;
    let info = s
        .eventually(30, "vault_info", json!({}), |v| {
            v["pdfs"]["first_pass_ms"].is_u64()
        })
        .await;
    info["pdfs"].clone()
}

/// (path, page, line) of each hit.
fn places(v: &Value) -> Vec<(String, Option<u64>, u64)> {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h["page"].as_u64(),
                h["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn search_covers_pdf_text_with_the_page_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());

    // Without --index-pdfs: notes only.
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s.ok("search_notes", json!({"query": "zebra"})).await;
    assert!(
        places(&r)
            .iter()
            .all(|(p, page, _)| p.ends_with(".md") && page.is_none())
    );
    s.stop().await;

    let s = Server::start_with(tmp.path(), &["--index-pdfs"]).await;
    let status = pdfs_ready(&s).await;
    assert_eq!(
        status["pdfs"], 3,
        "the hidden folder's PDF is not read: {status}"
    );
    assert_eq!(status["without_text"], 1, "{status}");
    assert_eq!(status["pages"], 6, "{status}");

    // Ranked: pages and notes merged by score, each page once, never the hidden PDF.
    let r = s.ok("search_notes", json!({"query": "zebra"})).await;
    let got = places(&r);
    let mut pdf_pages: Vec<(String, Option<u64>)> = got
        .iter()
        .filter(|(p, ..)| p.ends_with(".pdf"))
        .map(|(p, page, _)| (p.clone(), *page))
        .collect();
    pdf_pages.sort();
    assert_eq!(
        pdf_pages,
        vec![
            ("Docs/plan.pdf".to_owned(), Some(2)),
            ("Docs/plan.pdf".to_owned(), Some(3))
        ],
        "{r}"
    );
    assert_eq!(r["total"], 4, "two notes and two pages: {r}");
    assert!(!r.to_string().contains("secret"));
    let page2 = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["page"] == 2)
        .unwrap();
    assert!(
        page2["excerpt"].as_str().unwrap().contains("zebra"),
        "{page2}"
    );
    let scores: Vec<f64> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "best first: {scores:?}"
    );

    // Paged one by one: the same four hits, each once.
    let pages = s
        .pages("search_notes", json!({"query": "zebra", "limit": 1}))
        .await;
    let paged: Vec<_> = pages.iter().flat_map(places).collect();
    assert_eq!(paged, got);

    // Filters: a folder narrows PDFs as it narrows notes; a tag leaves PDFs out.
    let r = s
        .ok("search_notes", json!({"query": "zebra", "folder": "Other"}))
        .await;
    assert_eq!(r["total"], 0, "{r}");
    let r = s
        .ok("search_notes", json!({"query": "zebra", "tag": "animals"}))
        .await;
    assert_eq!(places(&r), vec![("Tagged.md".to_owned(), None, 2)]);

    // Exact: every line, the notes' first, then the PDFs' in order; paged to each line once.
    let r = s
        .ok("search_notes", json!({"query": "zebra", "mode": "exact"}))
        .await;
    let got = places(&r);
    let pdf_lines: Vec<_> = got
        .iter()
        .filter(|(p, ..)| p.ends_with(".pdf"))
        .cloned()
        .collect();
    assert_eq!(
        pdf_lines,
        vec![
            ("Docs/plan.pdf".to_owned(), Some(2), 1),
            ("Docs/plan.pdf".to_owned(), Some(2), 2),
            ("Docs/plan.pdf".to_owned(), Some(3), 1),
        ],
        "{r}"
    );
    assert_eq!(r["total"], got.len());
    let pages = s
        .pages(
            "search_notes",
            json!({"query": "zebra", "mode": "exact", "limit": 2}),
        )
        .await;
    assert_eq!(pages.iter().flat_map(places).collect::<Vec<_>>(), got);
    let r = s
        .ok(
            "search_notes",
            json!({"query": "revenue gr[a-z]+", "mode": "regex"}),
        )
        .await;
    assert_eq!(
        places(&r),
        vec![("Other/report.pdf".to_owned(), Some(1), 1)]
    );

    // An edited PDF is read again; a deleted one leaves search.
    std::fs::write(
        tmp.path().join("Other/report.pdf"),
        sample_pdf(&["Quarterly losses", "now with a zebra"]),
    )
    .unwrap();
    s.eventually(
        10,
        "search_notes",
        json!({"query": "zebra", "folder": "Other"}),
        |v| places(v) == vec![("Other/report.pdf".to_owned(), Some(2), 1)],
    )
    .await;
    let r = s.ok("search_notes", json!({"query": "revenue"})).await;
    assert_eq!(r["total"], 0, "the old text is gone: {r}");
    std::fs::remove_file(tmp.path().join("Docs/plan.pdf")).unwrap();
    s.eventually(10, "search_notes", json!({"query": "migration"}), |v| {
        v["total"] == 0
    })
    .await;
    s.stop().await;
}

#[tokio::test]
async fn ranked_search_prefers_pdf_pages_and_notes_with_every_word_alike() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let s = Server::start_with(tmp.path(), &["--index-pdfs"]).await;
    pdfs_ready(&s).await;

    // No note has both words, a page has: the page alone, and no word of a relaxed rule.
    let r = s
        .ok("search_notes", json!({"query": "zebra migration"}))
        .await;
    assert_eq!(
        places(&r),
        vec![("Docs/plan.pdf".to_owned(), Some(2), 1)],
        "the page with every word, not the notes with one: {r}"
    );
    assert_eq!(r["total"], 1, "{r}");
    assert!(!r.to_string().contains("every word"), "{r}");

    // A note has both words, no page has: the note alone.
    let r = s
        .ok("search_notes", json!({"query": "zebra crossing"}))
        .await;
    assert_eq!(
        places(&r),
        vec![("Zebra crossing.md".to_owned(), None, 1)],
        "{r}"
    );
    assert_eq!(r["total"], 1, "{r}");
    assert!(!r.to_string().contains("every word"), "{r}");

    // Nothing has both: notes and pages with either are ranked together, and it is said.
    let r = s
        .ok("search_notes", json!({"query": "crossing migration"}))
        .await;
    let got = places(&r);
    assert!(
        got.contains(&("Zebra crossing.md".to_owned(), None, 1))
            && got.contains(&("Docs/plan.pdf".to_owned(), Some(2), 1)),
        "{r}"
    );
    assert!(r.to_string().contains("no note has every word"), "{r}");
    s.stop().await;
}

#[tokio::test]
async fn pdf_texts_are_kept_with_the_index_cache_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let args = [
        "--index-pdfs",
        "--index-cache",
        cache.path().to_str().unwrap(),
    ];
    let s = Server::start_with(tmp.path(), &args).await;
    assert_eq!(pdfs_ready(&s).await["read_this_run"], 3);
    s.stop().await;

    std::fs::write(
        tmp.path().join("Other/report.pdf"),
        sample_pdf(&["Annual revenue fell"]),
    )
    .unwrap();
    let s = Server::start_with(tmp.path(), &args).await;
    let status = pdfs_ready(&s).await;
    assert_eq!(status["read_this_run"], 1, "only the changed PDF: {status}");
    assert_eq!(status["pages"], 6);
    let r = s.ok("search_notes", json!({"query": "migration"})).await;
    assert_eq!(places(&r), vec![("Docs/plan.pdf".to_owned(), Some(2), 1)]);
    let r = s.ok("search_notes", json!({"query": "annual"})).await;
    assert_eq!(
        places(&r),
        vec![("Other/report.pdf".to_owned(), Some(1), 1)]
    );
    s.stop().await;
}

#[tokio::test]
async fn slow_pdfs_being_indexed_or_read_never_hold_up_a_quick_pdf_read_on_demand() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["A/slow1.pdf", "A/slow2.pdf", "A/slow3.pdf"] {
        std::fs::create_dir_all(tmp.path().join("A")).unwrap();
        std::fs::write(tmp.path().join(name), slow_pdf()).unwrap();
    }
    std::fs::create_dir_all(tmp.path().join("Z")).unwrap();
    std::fs::write(
        tmp.path().join("Z/quick.pdf"),
        sample_pdf(&["quick to read"]),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("Z/other.pdf"),
        sample_pdf(&["another quick one"]),
    )
    .unwrap();
    write_tree(tmp.path(), &[("Note.md", "a note\n")]);
    let s = Server::start_with(tmp.path(), &["--index-pdfs", "--no-index-cache"]).await;

    // The indexing has begun its first pass (the slow PDFs come first, each bounded by the
    // worker's time limit): none of the five is read yet.
    s.wait_index_ready().await;
    s.eventually(30, "vault_info", json!({}), |v| v["pdfs"]["to_read"] == 5)
        .await;
    let r = s
        .call("read_attachment", json!({"path": "Z/quick.pdf"}))
        .await;
    assert!(
        texts_of(&r.raw).join("").contains("quick to read"),
        "{}",
        r.raw
    );
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(
        info["pdfs"]["to_read"], 5,
        "answered while the indexing still reads the first slow PDF: {info}"
    );

    // A slow PDF asked for holds one worker; a quick one asked for next answers first.
    let slow = s.call("read_attachment", json!({"path": "A/slow2.pdf"}));
    let quick = s.call("read_attachment", json!({"path": "Z/other.pdf"}));
    tokio::select! {
        biased;
        r = slow => panic!("the slow PDF answered before the quick one: {}", r.raw),
        r = quick => assert!(
            texts_of(&r.raw).join("").contains("another quick one"),
            "{}",
            r.raw
        ),
    }
    s.stop().await;
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_pdf_being_indexed_when_the_server_stops_is_given_up_and_read_at_the_next_start() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("A")).unwrap();
    std::fs::write(tmp.path().join("A/slow.pdf"), slow_pdf()).unwrap();
    std::fs::create_dir_all(tmp.path().join("Z")).unwrap();
    std::fs::write(tmp.path().join("Z/quick.pdf"), sample_pdf(&["quick"])).unwrap();
    write_tree(tmp.path(), &[("Note.md", "a note\n")]);
    let args = [
        "--index-pdfs",
        "--index-cache",
        cache.path().to_str().unwrap(),
    ];
    let pass_started =
        |v: &Value| v["pdfs"]["to_read"].as_u64() > Some(0) || v["pdfs"]["first_pass_ms"].is_u64();

    let mut s = Server::start_http(tmp.path(), &args).await;
    s.wait_index_ready().await;
    let info = s
        .eventually(30, "vault_info", json!({}), pass_started)
        .await;
    assert_eq!(info["pdfs"]["to_read"], 2, "reading the slow one: {info}");
    let http = s.http.take().unwrap();
    s.stop().await;
    assert!(http.terminate().await.success());

    // Neither PDF's text was kept: the slow one was given up, not recorded as unreadable.
    let s = Server::start_with(tmp.path(), &args).await;
    s.wait_index_ready().await;
    let info = s
        .eventually(30, "vault_info", json!({}), pass_started)
        .await;
    assert_eq!(info["pdfs"]["to_read"], 2, "both are read again: {info}");
    s.stop().await;
}

#[test]
fn a_one_shot_call_waits_for_the_pdfs_and_takes_the_texts_serve_saved() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap();
    let migration = r#"{"query": "migration"}"#;

    // No cache: the call reads the PDFs before it answers.
    let (ok, out, err) = call(
        tmp.path(),
        &[
            "search_notes",
            migration,
            "--index-pdfs",
            "--no-index-cache",
        ],
    );
    assert!(ok, "{err}");
    let r = json_of(&out);
    assert_eq!(
        places(&r),
        vec![("Docs/plan.pdf".to_owned(), Some(2), 1)],
        "{out}"
    );
    assert!(
        !out.contains("being read") && !err.contains("being read"),
        "{out}{err}"
    );

    // What a `serve` saved in the index cache is what a call answers from: no PDF read again.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s = Server::start_with(tmp.path(), &["--index-pdfs", "--index-cache", cache_arg]).await;
        assert_eq!(pdfs_ready(&s).await["read_this_run"], 3);
        s.stop().await;
    });
    let (ok, out, err) = call(
        tmp.path(),
        &[
            "vault_info",
            "{}",
            "--index-pdfs",
            "--index-cache",
            cache_arg,
        ],
    );
    assert!(ok, "{err}");
    let pdfs = &json_of(&out)["pdfs"];
    assert_eq!(pdfs["read_this_run"], 0, "{out}");
    assert_eq!(pdfs["pdfs"], 3, "{out}");

    // A PDF that takes longer than the call waits: the call answers with what it has and says
    // so, in its reply and on stderr; the texts read meanwhile are kept for the next call.
    std::fs::write(tmp.path().join("Docs/slow.pdf"), slow_pdf()).unwrap();
    let (ok, out, err) = call(
        tmp.path(),
        &[
            "search_notes",
            migration,
            "--index-pdfs",
            "--index-cache",
            cache_arg,
        ],
    );
    assert!(ok, "{err}");
    let r = json_of(&out);
    assert_eq!(
        places(&r),
        vec![("Docs/plan.pdf".to_owned(), Some(2), 1)],
        "{out}"
    );
    let notes = r["notes"].to_string();
    assert!(notes.contains("still being read (1 of 4 to go)"), "{out}");
    assert!(err.contains("still being read"), "{err}");
    let (ok, out, err) = call(
        tmp.path(),
        &[
            "vault_info",
            "{}",
            "--index-pdfs",
            "--index-cache",
            cache_arg,
        ],
    );
    assert!(ok, "{err}");
    let pdfs = &json_of(&out)["pdfs"];
    assert_eq!(
        pdfs["read_this_run"], 0,
        "the slow one's outcome was kept: {out}"
    );
    assert_eq!(pdfs["pdfs"], 4, "{out}");
    assert!(!err.contains("being read"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn the_pdf_worker_is_one_confined_thread_that_answers_down_its_pipe() {
    use std::io::{Read, Write};
    let mut worker = crate::common::capvault()
        .arg("pdf-worker")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pdf = sample_pdf(&["over the pipe"]);
    let mut stdin = worker.stdin.take().unwrap();
    stdin.write_all(&(pdf.len() as u64).to_le_bytes()).unwrap();
    stdin.write_all(&pdf).unwrap();
    stdin.flush().unwrap();
    let mut stdout = worker.stdout.take().unwrap();
    let mut len = [0u8; 8];
    stdout.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; u64::from_le_bytes(len) as usize];
    stdout.read_exact(&mut answer).unwrap();
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["Ok"]["page_count"], 1, "{answer}");
    assert!(
        answer["Ok"]["pages"][0]
            .as_str()
            .unwrap()
            .contains("over the pipe")
    );

    // It confined itself before reading (Landlock's restriction sets no_new_privs), and it has
    // one thread, so its fork per PDF is safe.
    let status = std::fs::read_to_string(format!("/proc/{}/status", worker.id())).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Threads:\t1\n"), "{status}");

    // The end of its input ends it.
    drop(stdin);
    assert!(worker.wait().unwrap().success());
}
