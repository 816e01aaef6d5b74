//! Attachments made ready for a model, without I/O: the bytes come from the capability layer.
//!
//! [`image`]: images decoded within bounds and scaled down to what a client shows.

pub mod image;
