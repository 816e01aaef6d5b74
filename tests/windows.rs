//! Windows' own path through the real binary: a PDF's text read by the PDF worker, a child
//! process of capvault in a job object (there is no `fork`), and a file that is not a PDF
//! reported without text. (The reply path Windows uses, with its deadline, and what a PDF
//! that cost its worker is told, are unit tests in src/engine/pdf.rs, which run everywhere.) The integration suite
//! (tests/integration.rs) is Unix's; this crate runs on GitHub's Windows runners
//! (.github/workflows/ci.yml) and is empty elsewhere.
#![cfg(windows)]
#![allow(clippy::disallowed_methods)]

use capvault::media::pdf::sample_pdf;

/// `capvault call VAULT read_attachment {"path": PATH}`: (whether it succeeded, stdout, stderr).
fn read_attachment(vault: &std::path::Path, path: &str) -> (bool, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_capvault"))
        .arg("call")
        .arg(vault)
        .arg("read_attachment")
        .arg(format!(r#"{{"path": "{path}"}}"#))
        .env("CAPVAULT_LOG", "capvault=warn")
        .env("XDG_CONFIG_HOME", vault.join("..").join("no-config"))
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_pdf_is_read_as_text_by_the_worker_process() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(vault.join(".obsidian")).unwrap();
    std::fs::write(
        vault.join("plan.pdf"),
        sample_pdf(&["The zebra migration starts in May"]),
    )
    .unwrap();
    std::fs::write(vault.join("garbage.pdf"), b"%PDF-1.4 this is not a PDF").unwrap();
    let (ok, out, err) = read_attachment(&vault, "plan.pdf");
    assert!(ok, "{err}");
    assert!(out.contains("zebra migration starts in May"), "{out}");
    assert!(!out.contains("PDF text needs a Unix system"), "{out}");
    let (_, out, err) = read_attachment(&vault, "garbage.pdf");
    assert!(!out.contains("zebra"), "{out}{err}");
}
