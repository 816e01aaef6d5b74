//! Fuzzes `media::pdf::extract` (what the PDF worker's child runs on a PDF in the vault) on
//! hostile bytes, with small bounds.
//!
//! The parser is not trusted not to panic: in capvault it runs only in a forked, confined child
//! that answers a panic as an error, and so does this target (`catch_unwind`, the panic message
//! silenced). What it checks is what the server relies on from an answer: the bounds hold (pages
//! read, bytes per page and in all), the text is valid UTF-8 without NULs, and the counts agree.
//! A stack overflow or an abort would still fail the run, as it should be looked at.

#![no_main]

use capvault::media::pdf::{PdfBounds, extract};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bounds = PdfBounds {
        max_pages: 8,
        max_page_bytes: 4096,
        max_text_bytes: 16 << 10,
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let answer = std::panic::catch_unwind(|| extract(data, &bounds));
    std::panic::set_hook(hook);
    if let Ok(Ok(text)) = answer {
        assert!(text.pages.len() <= bounds.max_pages);
        assert!(text.pages.len() <= text.page_count as usize);
        assert!(text.pages.iter().all(|p| p.len() <= bounds.max_page_bytes));
        assert!(text.text_bytes() <= bounds.max_text_bytes);
        assert!(text.pages.iter().all(|p| !p.contains('\0')));
        assert!(text.unreadable_pages as usize <= text.pages.len());
        if text.page_count as usize > bounds.max_pages {
            assert!(text.truncated);
        }
    }
});
