//! Images prepared for a model to see: the formats clients show (PNG, JPEG, GIF, WebP), decoded
//! within bounds and sent as they are when they fit, or downscaled and re-encoded when not.
//!
//! An image in a vault is untrusted input (a download, a clipping, a file a sync tool brought).
//! [`prepare`] reads the header first and refuses an image over the pixel budget before a pixel
//! is decoded, gives the decoder an allocation cap, decodes only the first frame of an
//! animation, and checks a stop signal between steps; decoding time grows with the pixels, so
//! the pixel budget bounds it too. Every image sent is decoded first, even one sent unchanged:
//! a client (and the model's API behind it) is never handed bytes that do not decode.
//!
//! The decoders are the `images` feature's (on by default). A build without it recognises an
//! image by its first bytes and [`prepare`] answers [`ImageError::NotBuilt`]: the caller sends
//! the file's own bytes, never as an image, with that reason.

#[cfg(feature = "images")]
use std::io::Cursor;

#[cfg(feature = "images")]
use image::codecs::jpeg::JpegEncoder;
#[cfg(feature = "images")]
use image::codecs::png::PngEncoder;
#[cfg(feature = "images")]
use image::{DynamicImage, ImageDecoder, ImageReader};

/// Longest side of an image sent, by default: the size above which Claude's API scales an
/// image down itself.
pub const DEFAULT_MAX_SIDE: u32 = 1568;
/// Largest `max_side` a caller may ask for.
pub const MAX_MAX_SIDE: u32 = 8192;
/// Bytes of an image sent at the default side; a larger side allows proportionally more, up to
/// [`MAX_SENT_BYTES`].
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;
/// Most bytes of one image sent, whatever the side asked for.
pub const MAX_SENT_BYTES: usize = 4 << 20;
/// Most pixels in an image that is decoded (width times height, read from the header).
pub const MAX_SOURCE_PIXELS: u64 = 50_000_000;
/// Most bytes the decoder may allocate for one image.
pub const MAX_DECODE_ALLOC: u64 = 400 << 20;

/// How an image is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBounds {
    /// Longest side of the image sent, in pixels.
    pub max_side: u32,
    /// Most bytes of the image sent.
    pub max_bytes: usize,
    /// Most pixels of the image decoded.
    pub max_source_pixels: u64,
}

impl Default for ImageBounds {
    fn default() -> Self {
        ImageBounds::with_side(DEFAULT_MAX_SIDE)
    }
}

impl ImageBounds {
    /// Bounds for images sent at most `max_side` pixels on their longest side (clamped to
    /// 16..=[`MAX_MAX_SIDE`]); the byte bound grows with the area, from [`DEFAULT_MAX_BYTES`]
    /// at the default side up to [`MAX_SENT_BYTES`].
    pub fn with_side(max_side: u32) -> Self {
        let max_side = max_side.clamp(16, MAX_MAX_SIDE);
        let scale = (f64::from(max_side) / f64::from(DEFAULT_MAX_SIDE)).powi(2);
        let max_bytes = (DEFAULT_MAX_BYTES as f64 * scale.max(1.0)) as usize;
        ImageBounds {
            max_side,
            max_bytes: max_bytes.min(MAX_SENT_BYTES),
            max_source_pixels: MAX_SOURCE_PIXELS,
        }
    }
}

/// An image ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The bytes to send.
    pub bytes: Vec<u8>,
    /// Their MIME type.
    pub mime: &'static str,
    /// The original's width and height, in pixels.
    pub source: (u32, u32),
    /// The sent image's width and height.
    pub size: (u32, u32),
    /// Whether the image was scaled down or re-encoded (else the original's bytes are sent).
    pub resized: bool,
}

/// Why an image cannot be prepared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Not one of the formats a client shows.
    #[error("not a PNG, JPEG, GIF or WebP image")]
    UnknownFormat,
    /// The header promises more pixels than the budget.
    #[error("is {width}x{height} pixels, over the {limit}-pixel budget for decoding")]
    TooManyPixels {
        /// Width from the header.
        width: u32,
        /// Height from the header.
        height: u32,
        /// The budget.
        limit: u64,
    },
    /// The decoder failed (a damaged or hostile file) or hit its allocation cap.
    #[error("cannot be decoded: {0}")]
    Decode(String),
    /// The stop signal was raised.
    #[error("cancelled")]
    Cancelled,
    /// Even the smallest image tried is over the byte bound.
    #[error("does not fit in {0} bytes even scaled down")]
    TooLarge(usize),
    /// This build has no image decoders.
    #[error(
        "not decoded: this build of capvault has no image decoders (built without the `images` feature)"
    )]
    NotBuilt,
}

/// The formats of images a client is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// GIF (its first frame is what is decoded).
    Gif,
    /// WebP.
    WebP,
}

impl Format {
    /// The format's MIME type.
    pub fn mime(self) -> &'static str {
        match self {
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
            Format::Gif => "image/gif",
            Format::WebP => "image/webp",
        }
    }

    #[cfg(feature = "images")]
    fn decoder_format(self) -> image::ImageFormat {
        match self {
            Format::Png => image::ImageFormat::Png,
            Format::Jpeg => image::ImageFormat::Jpeg,
            Format::Gif => image::ImageFormat::Gif,
            Format::WebP => image::ImageFormat::WebP,
        }
    }
}

/// The format of an image a client can be shown, from its first bytes (its signature; never
/// from its name).
pub fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(Format::Jpeg)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(Format::Gif)
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some(Format::WebP)
    } else {
        None
    }
}

/// Without the `images` feature: an image is recognised, never decoded.
#[cfg(not(feature = "images"))]
pub fn prepare(
    bytes: &[u8],
    _bounds: &ImageBounds,
    _stop: &dyn Fn() -> bool,
) -> Result<Prepared, ImageError> {
    sniff(bytes).ok_or(ImageError::UnknownFormat)?;
    Err(ImageError::NotBuilt)
}

/// Decodes `bytes` within `bounds` and returns what to send: the original bytes when the image
/// already fits (side and bytes) and needs no turning, else the image scaled down to fit and
/// encoded as JPEG (PNG when it has transparency). `stop` is checked between steps.
#[cfg(feature = "images")]
pub fn prepare(
    bytes: &[u8],
    bounds: &ImageBounds,
    stop: &dyn Fn() -> bool,
) -> Result<Prepared, ImageError> {
    let format = sniff(bytes).ok_or(ImageError::UnknownFormat)?;
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format.decoder_format());
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(decode_error)?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > bounds.max_source_pixels {
        return Err(ImageError::TooManyPixels {
            width,
            height,
            limit: bounds.max_source_pixels,
        });
    }
    if width == 0 || height == 0 {
        return Err(ImageError::Decode("an image of no pixels".into()));
    }
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    if stop() {
        return Err(ImageError::Cancelled);
    }
    let mut img = DynamicImage::from_decoder(decoder).map_err(decode_error)?;
    if stop() {
        return Err(ImageError::Cancelled);
    }
    let upright = orientation == image::metadata::Orientation::NoTransforms;
    if upright && width.max(height) <= bounds.max_side && bytes.len() <= bounds.max_bytes {
        return Ok(Prepared {
            bytes: bytes.to_vec(),
            mime: format.mime(),
            source: (width, height),
            size: (width, height),
            resized: false,
        });
    }
    img.apply_orientation(orientation);
    let alpha = img.color().has_alpha();
    let mut side = bounds.max_side.min(img.width().max(img.height()));
    // Each round: fit the side, encode; too many bytes scale the side by 3/4 (at most 12
    // rounds: from 8192 px to under 300).
    for _ in 0..12 {
        let scaled;
        let small = if img.width().max(img.height()) > side {
            scaled = img.thumbnail(side, side);
            &scaled
        } else {
            &img
        };
        if stop() {
            return Err(ImageError::Cancelled);
        }
        let out = encode(small, alpha)?;
        if out.len() <= bounds.max_bytes {
            return Ok(Prepared {
                bytes: out,
                mime: if alpha { "image/png" } else { "image/jpeg" },
                source: (width, height),
                size: (small.width(), small.height()),
                resized: true,
            });
        }
        side = side * 3 / 4;
        if side < 16 {
            break;
        }
    }
    Err(ImageError::TooLarge(bounds.max_bytes))
}

/// JPEG at quality 85 for an opaque image, PNG for one with transparency.
#[cfg(feature = "images")]
fn encode(img: &DynamicImage, alpha: bool) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    let result = if alpha {
        img.to_rgba8().write_with_encoder(PngEncoder::new(&mut out))
    } else {
        img.to_rgb8()
            .write_with_encoder(JpegEncoder::new_with_quality(&mut out, 85))
    };
    result.map_err(|e| ImageError::Decode(format!("re-encoding failed: {e}")))?;
    Ok(out)
}

#[cfg(feature = "images")]
fn decode_error(e: image::ImageError) -> ImageError {
    match e {
        image::ImageError::Limits(l) => {
            ImageError::Decode(format!("needs more memory than allowed ({l})"))
        }
        image::ImageError::Unsupported(u) => ImageError::Decode(format!("unsupported: {u}")),
        other => {
            // The decoders' messages can be long; the first line is enough.
            let text = other.to_string();
            let first = text.lines().next().unwrap_or("").chars().take(200);
            ImageError::Decode(first.collect())
        }
    }
}

#[cfg(all(test, feature = "images"))]
mod tests {
    use super::*;
    use image::{ImageBuffer, Rgb, Rgba};

    fn never() -> bool {
        false
    }

    /// CRC-32 as PNG chunks carry it.
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    fn png(w: u32, h: u32, alpha: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if alpha {
            let img = ImageBuffer::from_fn(w, h, |x, y| Rgba([x as u8, y as u8, 7, 128]));
            img.write_with_encoder(PngEncoder::new(&mut out)).unwrap();
        } else {
            let img = ImageBuffer::from_fn(w, h, |x, y| Rgb([x as u8, y as u8, 7]));
            img.write_with_encoder(PngEncoder::new(&mut out)).unwrap();
        }
        out
    }

    #[test]
    fn an_image_that_fits_is_sent_as_it_is() {
        let bytes = png(40, 30, false);
        let p = prepare(&bytes, &ImageBounds::default(), &never).unwrap();
        assert_eq!(p.bytes, bytes);
        assert_eq!(
            (p.mime, p.source, p.size, p.resized),
            ("image/png", (40, 30), (40, 30), false)
        );
    }

    #[test]
    fn a_large_image_is_scaled_to_the_side_keeping_its_shape() {
        let bytes = png(400, 100, false);
        let p = prepare(&bytes, &ImageBounds::with_side(100), &never).unwrap();
        assert_eq!(
            (p.mime, p.source, p.size, p.resized),
            ("image/jpeg", (400, 100), (100, 25), true)
        );
        let back = image::load_from_memory(&p.bytes).unwrap();
        assert_eq!((back.width(), back.height()), (100, 25));
        // Transparency keeps PNG.
        let p = prepare(&png(400, 100, true), &ImageBounds::with_side(100), &never).unwrap();
        assert_eq!((p.mime, p.size), ("image/png", (100, 25)));
    }

    #[test]
    fn a_photos_orientation_is_applied_before_it_is_sent() {
        // A 40x20 PNG with an eXIf chunk saying "rotate 90° clockwise" (orientation 6): shown
        // upright it is 20x40, so it is re-encoded turned, though it fits the bounds.
        let mut bytes = png(40, 20, false);
        let mut exif = b"MM\0\x2a\0\0\0\x08\0\x01".to_vec();
        exif.extend_from_slice(&[0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0]);
        let mut chunk = (exif.len() as u32).to_be_bytes().to_vec();
        chunk.extend_from_slice(b"eXIf");
        chunk.extend_from_slice(&exif);
        chunk.extend_from_slice(&crc32(&chunk[4..]).to_be_bytes());
        bytes.splice(33..33, chunk);
        let p = prepare(&bytes, &ImageBounds::default(), &never).unwrap();
        assert_eq!((p.source, p.size, p.resized), ((40, 20), (20, 40), true));
        let back = image::load_from_memory(&p.bytes).unwrap();
        assert_eq!((back.width(), back.height()), (20, 40));
    }

    #[test]
    fn too_many_bytes_scale_the_image_down_until_it_fits() {
        // Noise does not compress: 600x600 of it is far over 20 KB at any JPEG quality.
        let mut seed = 1u32;
        let img = ImageBuffer::from_fn(600, 600, |_, _| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            Rgb([(seed >> 24) as u8, (seed >> 16) as u8, (seed >> 8) as u8])
        });
        let mut bytes = Vec::new();
        img.write_with_encoder(PngEncoder::new(&mut bytes)).unwrap();
        let bounds = ImageBounds {
            max_bytes: 20_000,
            ..ImageBounds::with_side(600)
        };
        let p = prepare(&bytes, &bounds, &never).unwrap();
        assert!(p.bytes.len() <= 20_000, "{}", p.bytes.len());
        assert!(p.size.0 < 600 && p.resized, "{:?}", p.size);
        let tiny = ImageBounds {
            max_bytes: 10,
            ..bounds
        };
        assert_eq!(
            prepare(&bytes, &tiny, &never).unwrap_err(),
            ImageError::TooLarge(10)
        );
    }

    #[test]
    fn a_header_over_the_pixel_budget_is_refused_before_decoding() {
        // A valid PNG header (checksum and all) claiming 60000x60000 pixels: 3.6 billion
        // pixels, 14 GB decoded, refused from the header alone.
        let mut bytes = png(1, 1, false);
        bytes[16..20].copy_from_slice(&60_000u32.to_be_bytes());
        bytes[20..24].copy_from_slice(&60_000u32.to_be_bytes());
        let crc = crc32(&bytes[12..29]);
        bytes[29..33].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            prepare(&bytes, &ImageBounds::default(), &never).unwrap_err(),
            ImageError::TooManyPixels {
                width: 60_000,
                height: 60_000,
                limit: MAX_SOURCE_PIXELS
            }
        );
        let bounds = ImageBounds {
            max_source_pixels: 1000,
            ..ImageBounds::default()
        };
        assert_eq!(
            prepare(&png(40, 30, false), &bounds, &never).unwrap_err(),
            ImageError::TooManyPixels {
                width: 40,
                height: 30,
                limit: 1000
            }
        );
    }

    #[test]
    fn damaged_and_unknown_bytes_are_errors_and_a_stop_is_honoured() {
        let bytes = png(40, 30, false);
        assert!(matches!(
            prepare(&bytes[..bytes.len() / 2], &ImageBounds::default(), &never),
            Err(ImageError::Decode(_))
        ));
        assert_eq!(
            prepare(b"<svg/>", &ImageBounds::default(), &never).unwrap_err(),
            ImageError::UnknownFormat
        );
        assert_eq!(
            prepare(&bytes, &ImageBounds::default(), &|| true).unwrap_err(),
            ImageError::Cancelled
        );
    }

    #[test]
    fn the_signature_check_agrees_with_the_decoders_own() {
        let mut jpeg = Vec::new();
        ImageBuffer::from_fn(8, 8, |x, y| Rgb([x as u8, y as u8, 7]))
            .write_with_encoder(JpegEncoder::new_with_quality(&mut jpeg, 85))
            .unwrap();
        let gif = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec();
        let webp = b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00".to_vec();
        for (bytes, format) in [
            (png(4, 4, true), Format::Png),
            (jpeg, Format::Jpeg),
            (gif, Format::Gif),
            (webp, Format::WebP),
        ] {
            assert_eq!(sniff(&bytes), Some(format));
            assert_eq!(
                image::guess_format(&bytes).ok(),
                Some(format.decoder_format())
            );
        }
        for other in [
            &b"BM\x00\x00"[..],
            b"<svg/>",
            b"RIFF\x00\x00\x00\x00WAVE",
            b"\x89PN",
            b"",
        ] {
            assert_eq!(sniff(other), None, "{other:?}");
        }
    }

    #[test]
    fn the_byte_bound_grows_with_the_side_up_to_its_cap() {
        assert_eq!(ImageBounds::default().max_bytes, DEFAULT_MAX_BYTES);
        assert_eq!(ImageBounds::with_side(100).max_bytes, DEFAULT_MAX_BYTES);
        assert_eq!(
            ImageBounds::with_side(3136).max_bytes,
            4 * DEFAULT_MAX_BYTES
        );
        assert_eq!(ImageBounds::with_side(8192).max_bytes, MAX_SENT_BYTES);
        assert_eq!(ImageBounds::with_side(1).max_side, 16);
    }
}

#[cfg(all(test, not(feature = "images")))]
mod without_decoders {
    use super::*;

    #[test]
    fn an_image_is_recognised_and_refused_with_the_missing_feature_named() {
        let e = prepare(b"\x89PNG\r\n\x1a\n....", &ImageBounds::default(), &|| false);
        assert_eq!(e.unwrap_err(), ImageError::NotBuilt);
        assert!(
            ImageError::NotBuilt
                .to_string()
                .contains("`images` feature")
        );
        let e = prepare(b"<svg/>", &ImageBounds::default(), &|| false);
        assert_eq!(e.unwrap_err(), ImageError::UnknownFormat);
    }
}
