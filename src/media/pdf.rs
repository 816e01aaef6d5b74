//! The text of a PDF, page by page, from its bytes, within bounds.
//!
//! The parser ([`pdf_extract`], on lopdf) is not trusted to stay within any bound on a hostile
//! file: it can panic, recurse deeply or allocate without limit. [`extract`] bounds what it
//! returns (pages, bytes per page, bytes in all); time, memory and crashes are bounded by running
//! it only in a forked child of the PDF worker (`crate::engine::pdf`), never in the server.
//!
//! The parser is the `pdf` feature's (on by default); without it [`extract`] answers
//! [`PdfError::NoReader`] and no worker is started.

#[cfg(feature = "pdf")]
use std::io::Write;

use serde::{Deserialize, Serialize};

/// Most pages whose text is extracted; later pages are counted, not read.
pub const MAX_PAGES: usize = 2_000;
/// Most bytes of text kept from one page.
pub const MAX_PAGE_BYTES: usize = 256 * 1024;
/// Most bytes of text kept from one PDF, all pages together.
pub const MAX_TEXT_BYTES: usize = 8 << 20;

/// Largest PDF whose text is read (never over the vault's read limit, 8 MiB by default).
pub const MAX_PDF_BYTES: u64 = 64 << 20;

/// Whether a file name is a PDF's (`.pdf`, any case).
pub fn is_pdf_name(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && ext.eq_ignore_ascii_case("pdf"))
}

/// What [`extract`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdfBounds {
    /// Most pages read.
    pub max_pages: usize,
    /// Most bytes kept from one page.
    pub max_page_bytes: usize,
    /// Most bytes kept in all.
    pub max_text_bytes: usize,
}

impl Default for PdfBounds {
    fn default() -> Self {
        PdfBounds {
            max_pages: MAX_PAGES,
            max_page_bytes: MAX_PAGE_BYTES,
            max_text_bytes: MAX_TEXT_BYTES,
        }
    }
}

/// A PDF's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdfText {
    /// Pages in the document.
    pub page_count: u32,
    /// The text of pages 1, 2, ... (at most `max_pages`; a page that could not be read is
    /// empty and counted in `unreadable_pages`).
    pub pages: Vec<String>,
    /// Pages whose text could not be read.
    pub unreadable_pages: u32,
    /// Whether text was cut at a bound (pages, bytes of a page or in all).
    pub truncated: bool,
}

impl PdfText {
    /// Whether any page has text: a PDF of scanned pages has none.
    pub fn has_text(&self) -> bool {
        self.pages.iter().any(|p| !p.trim().is_empty())
    }

    /// Bytes of text held.
    pub fn text_bytes(&self) -> usize {
        self.pages.iter().map(String::len).sum()
    }
}

/// Why a PDF's text could not be had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum PdfError {
    /// Not a PDF, or too damaged to open.
    #[error("not a readable PDF ({0})")]
    Damaged(String),
    /// Encrypted with a password (one that opens with an empty password is read).
    #[error("the PDF is encrypted with a password")]
    Encrypted,
    /// The reader ran past its time bound.
    #[error("reading the PDF took longer than {0} s")]
    TooSlow(u64),
    /// The reader stopped without an answer (a crash on a damaged file).
    #[error("the PDF reader stopped on this file: {0}")]
    Crashed(String),
    /// No PDF reader runs in this process (tests in-process; a platform without one).
    #[error("PDFs cannot be read here: {0}")]
    NoReader(String),
}

/// The text of the PDF in `bytes`, page by page, within `bounds`. Runs the parser in this
/// process: call it only where a crash or a runaway cannot hurt (the worker's forked child,
/// the fuzz target).
#[cfg(feature = "pdf")]
pub fn extract(bytes: &[u8], bounds: &PdfBounds) -> Result<PdfText, PdfError> {
    let mut doc = pdf_extract::Document::load_mem(bytes)
        .map_err(|e| PdfError::Damaged(short(&e.to_string())))?;
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(PdfError::Encrypted);
    }
    let pages = doc.get_pages();
    // pdf-extract looks up inherited page attributes (MediaBox...) by following `/Parent`
    // recursively, without a bound: a chain that loops would overflow the stack.
    if let Some(&id) = pages.values().find(|&&id| !parents_end(&doc, id)) {
        return Err(PdfError::Damaged(format!(
            "the page tree loops or is deeper than {MAX_TREE_DEPTH} (object {})",
            id.0
        )));
    }
    let numbers: Vec<u32> = pages.keys().copied().collect();
    let mut text = PdfText {
        page_count: u32::try_from(numbers.len()).unwrap_or(u32::MAX),
        pages: Vec::with_capacity(numbers.len().min(bounds.max_pages)),
        unreadable_pages: 0,
        truncated: numbers.len() > bounds.max_pages,
    };
    let mut left = bounds.max_text_bytes;
    for &number in numbers.iter().take(bounds.max_pages) {
        let cap = bounds.max_page_bytes.min(left);
        let mut out = Capped::new(cap);
        let read = {
            let mut sink: &mut dyn Write = &mut out;
            let mut dev = pdf_extract::PlainTextOutput::new(&mut sink as &mut dyn Write);
            pdf_extract::output_doc_page(&doc, &mut dev, number)
        };
        if out.full {
            text.truncated = true;
        } else if read.is_err() {
            text.unreadable_pages += 1;
        }
        let page = tidy(&String::from_utf8_lossy(&out.bytes));
        left = left.saturating_sub(page.len());
        text.pages.push(page);
        if left == 0 {
            text.truncated = true;
            break;
        }
    }
    Ok(text)
}

/// What this build says of a PDF's text: it has no PDF reader.
pub const NOT_BUILT: &str =
    "this build of capvault reads no PDFs (built without the `pdf` feature)";

/// Without the `pdf` feature: no PDF is read.
#[cfg(not(feature = "pdf"))]
pub fn extract(_bytes: &[u8], _bounds: &PdfBounds) -> Result<PdfText, PdfError> {
    Err(PdfError::NoReader(NOT_BUILT.to_owned()))
}

/// Deepest page tree accepted (a page's `/Parent` chain).
#[cfg(feature = "pdf")]
const MAX_TREE_DEPTH: usize = 64;

/// Whether the `/Parent` chain from object `id` ends within [`MAX_TREE_DEPTH`] steps.
#[cfg(feature = "pdf")]
fn parents_end(doc: &pdf_extract::Document, mut id: pdf_extract::ObjectId) -> bool {
    for _ in 0..MAX_TREE_DEPTH {
        let parent = doc
            .get_dictionary(id)
            .ok()
            .and_then(|d| d.get(b"Parent").ok())
            .and_then(|p| p.as_reference().ok());
        match parent {
            Some(next) => id = next,
            None => return true,
        }
    }
    false
}

/// An error's text cut to a line a client can show.
#[cfg(feature = "pdf")]
fn short(s: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    line[..char_floor(line, 120)].to_owned()
}

/// The largest character boundary of `s` at or before `at`.
pub fn char_floor(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A page's text as the extractor lays it out, made plain: no trailing spaces, no run of more
/// than one empty line, no leading or trailing empty lines, no NULs.
#[cfg(feature = "pdf")]
fn tidy(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut empty = 0usize;
    for line in raw.lines() {
        let line = line.trim_end().replace('\0', "");
        if line.is_empty() {
            empty += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if empty > 0 { "\n\n" } else { "\n" });
        }
        empty = 0;
        out.push_str(&line);
    }
    out
}

/// A writer that keeps at most `cap` bytes and fails past them, which stops the page.
#[cfg(feature = "pdf")]
struct Capped {
    bytes: Vec<u8>,
    cap: usize,
    full: bool,
}

#[cfg(feature = "pdf")]
impl Capped {
    fn new(cap: usize) -> Self {
        Capped {
            bytes: Vec::new(),
            cap,
            full: false,
        }
    }
}

#[cfg(feature = "pdf")]
impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.cap - self.bytes.len();
        if buf.len() > room {
            // Keep whole characters only: the cut falls before the first byte that does not fit.
            let mut end = room;
            while end > 0 && (buf[end] & 0xC0) == 0x80 {
                end -= 1;
            }
            self.bytes.extend_from_slice(&buf[..end]);
            self.full = true;
            return Err(std::io::Error::other("page text over its bound"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A small PDF with one page per entry of `pages`, each line of a page written with the base
/// font Helvetica (no embedded font), as a plain writer of PDFs makes them: for tests,
/// benchmarks and the fuzz target's seeds.
pub fn sample_pdf(pages: &[&str]) -> Vec<u8> {
    let mut objects: Vec<String> = Vec::new();
    let n = pages.len();
    // 1: catalog, 2: pages, 3: font, then a page and its content per page.
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into());
    for (i, text) in pages.iter().enumerate() {
        let content_id = 5 + 2 * i;
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
        ));
        let mut stream = String::from("BT /F1 12 Tf 14 TL 72 720 Td ");
        for line in text.lines() {
            let escaped = line
                .replace('\\', "\\\\")
                .replace('(', "\\(")
                .replace(')', "\\)");
            stream.push_str(&format!("({escaped}) Tj T* "));
        }
        stream.push_str("ET");
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[cfg(all(test, feature = "pdf"))]
mod tests {
    use super::*;

    #[test]
    fn each_page_text_is_read_in_order() {
        let pdf = sample_pdf(&[
            "Quarterly revenue grew\nin the north",
            "Second page (draft)",
        ]);
        let text = extract(&pdf, &PdfBounds::default()).unwrap();
        assert_eq!(text.page_count, 2);
        assert_eq!(text.pages.len(), 2);
        assert!(
            text.pages[0].contains("Quarterly revenue grew"),
            "{:?}",
            text.pages
        );
        assert!(text.pages[0].contains("in the north"), "{:?}", text.pages);
        assert!(
            text.pages[1].contains("Second page (draft)"),
            "{:?}",
            text.pages
        );
        assert!(!text.truncated && text.unreadable_pages == 0 && text.has_text());
    }

    #[test]
    fn pages_past_the_bound_are_counted_not_read() {
        let pdf = sample_pdf(&["one", "two", "three"]);
        let bounds = PdfBounds {
            max_pages: 2,
            ..PdfBounds::default()
        };
        let text = extract(&pdf, &bounds).unwrap();
        assert_eq!(
            (text.page_count, text.pages.len(), text.truncated),
            (3, 2, true)
        );
    }

    #[test]
    fn text_past_the_byte_bounds_is_cut_on_a_character() {
        let line = "é".repeat(400);
        let pdf = sample_pdf(&[&line, &line, &line]);
        let bounds = PdfBounds {
            max_pages: 10,
            max_page_bytes: 301,
            max_text_bytes: 700,
        };
        let text = extract(&pdf, &bounds).unwrap();
        assert!(text.truncated);
        assert!(
            text.pages.iter().all(|p| p.len() <= 301),
            "{:?}",
            text.pages
        );
        assert!(text.text_bytes() <= 700);
        assert_eq!(text.pages.len(), 3, "the third page gets what is left");
    }

    #[test]
    fn a_page_without_text_says_so() {
        let text = extract(&sample_pdf(&[""]), &PdfBounds::default()).unwrap();
        assert_eq!(text.page_count, 1);
        assert!(!text.has_text());
    }

    #[test]
    fn garbage_and_truncated_files_are_damaged_not_panics() {
        assert!(matches!(
            extract(b"not a pdf at all", &PdfBounds::default()),
            Err(PdfError::Damaged(_))
        ));
        let pdf = sample_pdf(&["hello"]);
        for cut in [0, 8, 20, pdf.len() / 2] {
            // The parser may recover a cut file or refuse it; it must answer either way
            // (a panic here would fail the test, as it would kill only the worker's child).
            let _ = extract(&pdf[..cut], &PdfBounds::default());
        }
    }

    #[test]
    fn a_page_tree_that_loops_is_damaged_not_a_stack_overflow() {
        // The fuzzer's find: the pages' node names itself as its parent.
        let pdf = String::from_utf8(sample_pdf(&["hello"])).unwrap();
        // (Same length, so the cross-reference table's offsets still hold.)
        let looped = pdf.replacen("/Type /Pages ", "/Parent 2 0 R", 1);
        assert_ne!(looped, pdf);
        match extract(looped.as_bytes(), &PdfBounds::default()) {
            Err(PdfError::Damaged(why)) => assert!(why.contains("page tree loops"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tidy_drops_trailing_spaces_and_extra_empty_lines() {
        assert_eq!(tidy("\n\n a  \n\n\n\nb\n c\0\n\n"), " a\n\nb\n c");
    }
}
