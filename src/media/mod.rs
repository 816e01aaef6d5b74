//! Attachments made ready for a model, without I/O: the bytes come from the capability layer.
//!
//! [`image`]: images decoded within bounds and scaled down to what a client shows.
//! [`pdf`]: a PDF's text by page, within bounds (run only where a crash cannot hurt).

pub mod image;
pub mod pdf;
