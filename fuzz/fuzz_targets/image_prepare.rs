//! Fuzzes `media::image::prepare` (what `read_attachment` and `read_note`'s `include_images` do
//! with an image in the vault) on hostile bytes, with small bounds so each run stays fast.
//!
//! It must not panic. An image it answers with must decode, fit the side and byte bounds, and
//! report the size it really has.

#![no_main]

use capvault::media::image::{ImageBounds, prepare};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bounds = ImageBounds {
        max_source_pixels: 1 << 20,
        max_bytes: 64 << 10,
        ..ImageBounds::with_side(64)
    };
    if let Ok(p) = prepare(data, &bounds, &|| false) {
        assert!(p.bytes.len() <= bounds.max_bytes);
        if p.resized {
            assert!(p.size.0.max(p.size.1) <= bounds.max_side);
            let back = image::load_from_memory(&p.bytes).expect("a re-encoded image decodes");
            assert_eq!((back.width(), back.height()), p.size);
        } else {
            assert_eq!(p.bytes, data);
            assert_eq!(p.size, p.source);
        }
        assert!(u64::from(p.source.0) * u64::from(p.source.1) <= bounds.max_source_pixels);
    }
});
