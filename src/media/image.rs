//! Images prepared for a model to see: the formats clients show (PNG, JPEG, GIF, WebP), decoded
//! within bounds and sent as they are when they fit, or downscaled and re-encoded when not.
//!
//! An image in a vault is untrusted input (a download, a clipping, a file a sync tool brought).
//! Everything a decode may allocate is bounded and known before it runs, so that the server can
//! reserve it from its memory pool first: [`open`] reads the header and metadata within
//! [`header_cost`] (the PNG decoder's cap, [`MAX_METADATA_BYTES`], bounds a colour profile or a
//! text chunk that inflates to gigabytes), refuses an image over the pixel budget before a pixel
//! is decoded, and computes [`Opened::cost`]: the pixels, the format's working buffers and the
//! prepared copies, refused over [`MAX_DECODE_ALLOC`]. [`Opened::prepare`] then decodes only the
//! first frame of an animation and checks a stop signal between steps; decoding time grows with
//! the pixels, so the pixel budget bounds it too. Every image sent is decoded first, even one
//! sent unchanged: a client (and the model's API behind it) is never handed bytes that do not
//! decode. A decoder's error is told in a sentence, never as a Rust structure.
//!
//! The decoders are the `images` feature's (on by default). A build without it recognises an
//! image by its first bytes and [`prepare`] answers [`ImageError::NotBuilt`]: the caller sends
//! the file's own bytes, never as an image, with that reason.

#[cfg(feature = "images")]
use std::borrow::Cow;
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
/// Most bytes decoding and preparing one image may take beyond its header ([`Opened::cost`]);
/// an image that would need more is not decoded.
pub const MAX_DECODE_ALLOC: u64 = 512 << 20;

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
    /// Decoding and preparing it would take more memory than one image may.
    #[error(
        "not decoded: it needs {} MiB to decode, over the {} MiB one image may take",
        needed.div_ceil(1 << 20),
        limit >> 20
    )]
    TooMuchMemory {
        /// What it would take ([`Opened::cost`]).
        needed: u64,
        /// [`MAX_DECODE_ALLOC`].
        limit: u64,
    },
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

    /// The format's name, as people write it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Png => "PNG",
            Format::Jpeg => "JPEG",
            Format::Gif => "GIF",
            Format::WebP => "WebP",
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

/// Image formats recognised by their first bytes, the four a client is shown and a few more (so
/// that a BMP or a TIFF is labelled as what it is): their MIME types. Never from the name.
pub fn sniff_mime(bytes: &[u8]) -> Option<&'static str> {
    if let Some(f) = sniff(bytes) {
        return Some(f.mime());
    }
    // A BMP's "BM" is followed, at 14, by the size of its DIB header (one of a few).
    let dib = bytes
        .get(14..18)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let brand = bytes.get(8..12);
    if bytes.starts_with(b"BM") && matches!(dib, Some(12 | 40 | 52 | 56 | 64 | 108 | 124)) {
        Some("image/bmp")
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        Some("image/tiff")
    } else if bytes.len() >= 6 && bytes.starts_with(&[0, 0, 1, 0]) && bytes[4..6] != [0, 0] {
        Some("image/x-icon")
    } else if bytes.get(4..8) == Some(b"ftyp") && matches!(brand, Some(b"avif" | b"avis")) {
        Some("image/avif")
    } else if bytes.get(4..8) == Some(b"ftyp")
        && matches!(brand, Some(b"heic" | b"heix" | b"heim" | b"heis" | b"mif1"))
    {
        Some("image/heic")
    } else {
        None
    }
}

/// Whether `mime` names an image format whose signature [`sniff_mime`] knows: a file named as
/// one whose bytes lack the signature is not that format (a text file named `.png`).
pub fn has_signature(mime: &str) -> bool {
    matches!(
        mime,
        "image/png"
            | "image/jpeg"
            | "image/gif"
            | "image/webp"
            | "image/bmp"
            | "image/tiff"
            | "image/x-icon"
            | "image/vnd.microsoft.icon"
            | "image/avif"
            | "image/heic"
    )
}

/// Most bytes the decoders may allocate while reading an image's header and metadata: colour
/// profiles (a PNG's iCCP chunk is compressed: a few MB of it can inflate to gigabytes), EXIF,
/// text chunks, and the chunks' own buffers. The PNG decoder is given it as its allocation cap;
/// the other formats' metadata is stored uncompressed, within the file's own size.
pub const MAX_METADATA_BYTES: u64 = 16 << 20;

/// Most bytes reading the header of an image of `len` bytes may take, everything held until its
/// decode ends: [`MAX_METADATA_BYTES`], the decoder's copy of the file (the JPEG decoder's),
/// metadata copied out of it, and the original's bytes when it is sent as it is. Reserved
/// before [`open`] runs.
pub const fn header_cost(len: u64) -> u64 {
    MAX_METADATA_BYTES + 3 * len
}

/// An image whose header was read ([`open`]): its size and what decoding it will cost, before a
/// pixel is decoded.
#[cfg(feature = "images")]
pub struct Opened<'a> {
    bytes: &'a [u8],
    format: Format,
    decoder: Box<dyn ImageDecoder + 'a>,
    width: u32,
    height: u32,
    orientation: image::metadata::Orientation,
    bounds: ImageBounds,
    cost: u64,
}

/// An image whose header was read ([`open`]); without the `images` feature there is none.
#[cfg(not(feature = "images"))]
pub struct Opened<'a> {
    never: std::convert::Infallible,
    _bytes: std::marker::PhantomData<&'a [u8]>,
}

#[cfg(not(feature = "images"))]
impl Opened<'_> {
    /// What decoding the image will cost.
    pub fn cost(&self) -> u64 {
        match self.never {}
    }

    /// Decodes the image.
    pub fn prepare(self, _stop: &dyn Fn() -> bool) -> Result<Prepared, ImageError> {
        match self.never {}
    }
}

/// Without the `images` feature: an image is recognised, never decoded.
#[cfg(not(feature = "images"))]
pub fn open<'a>(bytes: &'a [u8], _bounds: &ImageBounds) -> Result<Opened<'a>, ImageError> {
    sniff(bytes).ok_or(ImageError::UnknownFormat)?;
    Err(ImageError::NotBuilt)
}

/// Reads the header of the image in `bytes` (allocating at most [`header_cost`]) and refuses
/// it when its pixels are over `bounds` or decoding it would take more than
/// [`MAX_DECODE_ALLOC`]; [`Opened::cost`] says what decoding it may take.
#[cfg(feature = "images")]
pub fn open<'a>(bytes: &'a [u8], bounds: &ImageBounds) -> Result<Opened<'a>, ImageError> {
    let format = sniff(bytes).ok_or(ImageError::UnknownFormat)?;
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format.decoder_format());
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_METADATA_BYTES);
    reader.limits(limits);
    let mut decoder: Box<dyn ImageDecoder + 'a> =
        Box::new(reader.into_decoder().map_err(|e| decode_error(format, e))?);
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
    let bpp = u64::from(decoder.color_type().bytes_per_pixel());
    let cost = decode_cost(format, bytes, width, height, bpp, bounds.max_side);
    if cost > MAX_DECODE_ALLOC {
        return Err(ImageError::TooMuchMemory {
            needed: cost,
            limit: MAX_DECODE_ALLOC,
        });
    }
    // What the decoders count against their cap while decoding: the GIF decoder's frame
    // buffer, when the first frame does not fill the screen.
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(u64::from(width) * u64::from(height) * 4 + (1 << 20));
    decoder
        .set_limits(limits)
        .map_err(|e| decode_error(format, e))?;
    Ok(Opened {
        bytes,
        format,
        decoder,
        width,
        height,
        orientation,
        bounds: *bounds,
        cost,
    })
}

/// Most bytes decoding and preparing an image of `width` x `height` pixels of `bpp` bytes may
/// take beyond its header ([`header_cost`]), sent at most `max_side` on its longest side: the
/// decoded pixels, the decoder's working buffers for the format, and the prepared copies (the
/// image scaled, turned upright, in 8 bits, encoded; at most one of each at a time).
#[cfg(feature = "images")]
fn decode_cost(format: Format, bytes: &[u8], width: u32, height: u32, bpp: u64, side: u32) -> u64 {
    let (w, h) = (u64::from(width), u64::from(height));
    let pixels = w * h;
    let decoded = pixels * bpp;
    let working = match format {
        // Rows being unfiltered, the inflater's window and tables.
        Format::Png => 4 * (w * bpp + 1) + (1 << 20),
        Format::Jpeg => jpeg_working(bytes, w, h),
        // The first frame's buffer when it does not fill the screen (capped so by `open`).
        Format::Gif => pixels * 4 + (1 << 20),
        Format::WebP => webp_working(bytes, w, h),
    };
    let side = u64::from(side);
    let sent = pixels.min(side * side);
    // A scaled copy and a turned one (`bpp` each), the 8-bit copy the encoder reads (4), the
    // encoded bytes with room for their buffer's growth (8).
    let prepared = sent * (2 * bpp + 4 + 8);
    decoded + working + prepared
}

/// The JPEG decoder's buffers: a progressive (or multi-scan) file keeps every component's 8x8
/// blocks (2 bytes a sample) until its last scan, for the components and sampling factors its
/// frame header declares (four full-size components when it cannot be read), and rows for
/// upsampling.
#[cfg(feature = "images")]
fn jpeg_working(bytes: &[u8], w: u64, h: u64) -> u64 {
    let components = jpeg_components(bytes).unwrap_or_else(|| vec![(4, 4); 4]);
    let hmax = components.iter().map(|c| u64::from(c.0)).max().unwrap_or(1);
    let vmax = components.iter().map(|c| u64::from(c.1)).max().unwrap_or(1);
    let mcu_x = w.div_ceil(8 * hmax.max(1));
    let mcu_y = h.div_ceil(8 * vmax.max(1));
    let mut total = 1 << 20;
    for &(ch, cv) in &components {
        let (ch, cv) = (u64::from(ch), u64::from(cv));
        // Interleaved, or one component alone in its scan (8x8 blocks over the whole image).
        let blocks = (mcu_x * mcu_y * ch * cv).max(w.div_ceil(8) * h.div_ceil(8));
        total += blocks * 64 * 2;
        // Rows: the component's width stride, 8 lines of each of its vertical samples, a few
        // buffers of them.
        total += mcu_x * ch * 8 * cv * 8 * 2 * 8;
    }
    total
}

/// The sampling factors (horizontal, vertical) of each component in a JPEG's frame header.
#[cfg(feature = "images")]
fn jpeg_components(bytes: &[u8]) -> Option<Vec<(u8, u8)>> {
    let mut at = 2;
    loop {
        // Fill bytes may precede a marker.
        while *bytes.get(at)? == 0xFF && *bytes.get(at + 1)? == 0xFF {
            at += 1;
        }
        if *bytes.get(at)? != 0xFF {
            return None;
        }
        let marker = *bytes.get(at + 1)?;
        if marker == 0xD8 || marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
            at += 2;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([
            *bytes.get(at + 2)?,
            *bytes.get(at + 3)?,
        ]));
        let body = bytes.get(at + 4..at + 2 + len)?;
        let frame = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if frame {
            let count = usize::from(*body.get(5)?);
            let mut out = Vec::with_capacity(count);
            for i in 0..count {
                let factors = *body.get(6 + 3 * i + 1)?;
                out.push(((factors >> 4).max(1), (factors & 15).max(1)));
            }
            return (!out.is_empty()).then_some(out);
        }
        if marker == 0xDA {
            // A scan before any frame header.
            return None;
        }
        at += 2 + len;
    }
}

/// The WebP decoder's buffers, by the file's kind: a lossy image's planes (1.5 bytes a pixel,
/// in 16x16 blocks), a lossless one's pixels and transforms (8), an extended one's (alpha,
/// animation: the canvas, a frame, the planes and the alpha plane) 16.
#[cfg(feature = "images")]
fn webp_working(bytes: &[u8], w: u64, h: u64) -> u64 {
    let padded = w.div_ceil(16) * 16 * h.div_ceil(16) * 16;
    let per_pixel = match bytes.get(12..16) {
        Some(b"VP8 ") => 2,
        Some(b"VP8L") => 8,
        _ => 16,
    };
    padded * per_pixel + (1 << 20)
}

#[cfg(feature = "images")]
impl Opened<'_> {
    /// Most bytes decoding and preparing the image may take beyond [`header_cost`]: reserve
    /// it before [`Opened::prepare`].
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// Decodes the image and returns what to send: the original bytes when the image already
    /// fits (side and bytes) and needs no turning, else the image scaled down to fit, turned
    /// upright, and encoded as JPEG (PNG when it has transparency). `stop` is checked between
    /// steps.
    pub fn prepare(self, stop: &dyn Fn() -> bool) -> Result<Prepared, ImageError> {
        let Opened {
            bytes,
            format,
            decoder,
            width,
            height,
            orientation,
            bounds,
            ..
        } = self;
        if stop() {
            return Err(ImageError::Cancelled);
        }
        let img = DynamicImage::from_decoder(decoder).map_err(|e| decode_error(format, e))?;
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
        let alpha = img.color().has_alpha();
        let mut side = bounds.max_side.min(width.max(height));
        // Each round: fit the side, turn, encode; too many bytes scale the side by 3/4 (at most
        // 12 rounds: from 8192 px to under 300). Scaled before it is turned, so that only the
        // small image is copied to turn it.
        for _ in 0..12 {
            let mut small = if img.width().max(img.height()) > side {
                Cow::Owned(img.thumbnail(side, side))
            } else {
                Cow::Borrowed(&img)
            };
            if !upright {
                small.to_mut().apply_orientation(orientation);
            }
            if stop() {
                return Err(ImageError::Cancelled);
            }
            let out = encode(&small, alpha)?;
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
}

/// Decodes `bytes` within `bounds` and returns what to send ([`open`], then
/// [`Opened::prepare`]), with no memory reserved: callers in the server reserve
/// [`header_cost`] and [`Opened::cost`] from the process's pool between the two.
pub fn prepare(
    bytes: &[u8],
    bounds: &ImageBounds,
    stop: &dyn Fn() -> bool,
) -> Result<Prepared, ImageError> {
    open(bytes, bounds)?.prepare(stop)
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

/// A decoder's error as a short sentence for a person: what kind of failure, with the
/// decoder's own detail when it reads as text (never a Rust structure's debug form).
#[cfg(feature = "images")]
fn decode_error(format: Format, e: image::ImageError) -> ImageError {
    let name = format.name();
    let detail = |text: &str| {
        human_detail(text)
            .map(|d| format!(" ({d})"))
            .unwrap_or_default()
    };
    ImageError::Decode(match e {
        image::ImageError::Limits(_) => format!(
            "needs more memory than allowed: its metadata (colour profile, text, EXIF) is over \
             {} MiB, or a frame is larger than the image",
            MAX_METADATA_BYTES >> 20
        ),
        image::ImageError::Unsupported(u) => {
            format!(
                "uses a {name} feature the decoder does not support{}",
                detail(&u.to_string())
            )
        }
        image::ImageError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            format!("the {name} file ends before its image does (cut short)")
        }
        image::ImageError::Decoding(d) => {
            let inner = std::error::Error::source(&d).map(|s| s.to_string());
            let inner = inner.unwrap_or_else(|| d.to_string());
            format!("damaged {name} data{}", detail(&inner))
        }
        other => format!("damaged {name} data{}", detail(&other.to_string())),
    })
}

/// The first line of a decoder's message, readable: a PNG chunk's debug form
/// (`ChunkType { type: IDA\0, critical: true, ... }`) reduced to its name, a trailing full stop
/// dropped, the first letter lowered unless the word is an acronym; `None` when what is left still
/// reads as code or says nothing.
#[cfg(feature = "images")]
fn human_detail(text: &str) -> Option<String> {
    let mut line = text.lines().next().unwrap_or("").trim().to_owned();
    while let Some(at) = line.find("ChunkType {") {
        let rest = &line[at..];
        let end = rest.find('}').map_or(line.len(), |e| at + e + 1);
        let name = rest
            .split_once("type: ")
            .map(|(_, t)| t.split(',').next().unwrap_or("").trim().to_owned())
            .unwrap_or_default();
        line.replace_range(at..end, &name);
    }
    let line = line.trim_end_matches('.').trim();
    if line.is_empty() || line.contains(['{', '}']) || line.contains("::") {
        return None;
    }
    let mut chars = line.chars();
    let first = chars.next()?;
    let acronym = line.chars().nth(1).is_some_and(char::is_uppercase);
    let mut out: String = if acronym {
        line.to_owned()
    } else {
        first.to_lowercase().chain(chars).collect()
    };
    if out.chars().count() > 160 {
        out = out.chars().take(160).collect::<String>() + "…";
    }
    Some(out)
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

    include!("../../tests/common/zlib.rs");

    /// `png` with a chunk of `kind` holding `data` after its header.
    fn with_chunk(mut png: Vec<u8>, kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
        chunk.extend_from_slice(kind);
        chunk.extend_from_slice(data);
        chunk.extend_from_slice(&crc32(&chunk[4..]).to_be_bytes());
        png.splice(33..33, chunk);
        png
    }

    #[test]
    fn the_zlib_bomb_inflates_as_it_says() {
        // Under the cap, the decoder keeps the profile: all of it, zeros.
        let mut icc = b"icc\0\0".to_vec();
        icc.extend_from_slice(&zlib_zeros(1 << 20));
        assert!(icc.len() < 1100, "{}", icc.len());
        let bytes = with_chunk(png(4, 4, false), b"iCCP", &icc);
        let mut opened = open(&bytes, &ImageBounds::default()).unwrap();
        let profile = opened.decoder.icc_profile().unwrap().unwrap();
        assert_eq!(profile.len(), 1 << 20);
        assert!(profile.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_colour_profile_that_inflates_to_gigabytes_is_cut_at_the_metadata_cap() {
        // A 64x64 image whose iCCP profile is 4 MB of zlib inflating to 4 GiB.
        let mut icc = b"icc\0\0".to_vec();
        icc.extend_from_slice(&zlib_zeros(4 << 30));
        assert!(icc.len() < 4_300_000, "{}", icc.len());
        let bytes = with_chunk(png(64, 64, false), b"iCCP", &icc);
        let opened = open(&bytes, &ImageBounds::default()).unwrap();
        // What it may take is what a 64x64 image takes, plus the header's own bound.
        assert!(opened.cost() < 2 << 20, "{}", opened.cost());
        assert!(header_cost(bytes.len() as u64) < 32 << 20);
        let p = opened.prepare(&never).unwrap();
        assert_eq!((p.source, p.size), ((64, 64), (64, 64)));
        // A text chunk can hold no more than the cap either.
        let text = vec![b'a'; (MAX_METADATA_BYTES + 1) as usize];
        let mut chunk = b"Comment\0".to_vec();
        chunk.extend_from_slice(&text);
        let bytes = with_chunk(png(8, 8, false), b"tEXt", &chunk);
        let e = prepare(&bytes, &ImageBounds::default(), &never).unwrap_err();
        assert!(e.to_string().contains("more memory than allowed"), "{e}");
    }

    #[test]
    fn the_decode_cost_counts_the_pixels_and_the_copies_and_refuses_past_the_cap() {
        let bytes = png(400, 300, true);
        let cost = open(&bytes, &ImageBounds::default()).unwrap().cost();
        // RGBA: the decoded pixels, a scaled and a turned copy, an 8-bit copy, the encoded bytes.
        assert!(cost >= 400 * 300 * (4 + 8 + 4 + 8), "{cost}");
        assert!(cost < 400 * 300 * 24 + (2 << 20), "{cost}");
        // 7000x7000: its pixels fit the budget; sent at 8192 px its copies would be as large as
        // it, over what one image may take; at the default side they fit.
        let mut big = png(1, 1, true);
        big[16..20].copy_from_slice(&7000u32.to_be_bytes());
        big[20..24].copy_from_slice(&7000u32.to_be_bytes());
        let crc = crc32(&big[12..29]);
        big[29..33].copy_from_slice(&crc.to_be_bytes());
        match open(&big, &ImageBounds::with_side(8192)) {
            Err(ImageError::TooMuchMemory { needed, limit }) => {
                assert!(needed > limit && limit == MAX_DECODE_ALLOC, "{needed}");
            }
            other => panic!("{:?}", other.map(|o| o.cost())),
        }
        let fits = open(&big, &ImageBounds::default()).unwrap().cost();
        assert!(
            (7000 * 7000 * 4..MAX_DECODE_ALLOC).contains(&fits),
            "{fits}"
        );
    }

    #[test]
    fn a_jpegs_working_buffers_follow_its_components_and_sampling() {
        let mut jpeg = Vec::new();
        ImageBuffer::from_fn(64, 48, |x, y| Rgb([x as u8, y as u8, 7]))
            .write_with_encoder(JpegEncoder::new_with_quality(&mut jpeg, 85))
            .unwrap();
        let comps = jpeg_components(&jpeg).unwrap();
        assert_eq!(comps.len(), 3);
        // Whole-image planes of 2-byte samples: at least 1.5 samples a pixel for 4:2:0.
        assert!(jpeg_working(&jpeg, 4000, 3000) >= 4000 * 3000 * 3);
        // Unreadable: four full-size components assumed.
        assert!(jpeg_working(b"\xFF\xD8", 4000, 3000) >= 4000 * 3000 * 8);
    }

    #[test]
    fn a_decoders_error_is_a_sentence_not_a_rust_structure() {
        // The image data's chunk renamed "IDA\0": the PNG decoder's message names it by its
        // debug form, `ChunkType { type: IDA\0, critical: true, ... }`.
        let mut bytes = png(8, 8, false);
        let at = bytes.windows(4).position(|w| w == b"IDAT").unwrap();
        bytes[at + 3] = 0;
        let len = u32::from_be_bytes(bytes[at - 4..at].try_into().unwrap()) as usize;
        let crc = crc32(&bytes[at..at + 4 + len]);
        bytes[at + 4 + len..at + 8 + len].copy_from_slice(&crc.to_be_bytes());
        let e = prepare(&bytes, &ImageBounds::default(), &never)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('{') && !e.contains("ChunkType"), "{e}");
        assert!(
            e.starts_with("cannot be decoded: damaged PNG data ("),
            "{e}"
        );
        assert!(e.contains("IDA"), "{e}");
        // Cut short: said so.
        let bytes = png(200, 200, false);
        let e = prepare(&bytes[..bytes.len() / 2], &ImageBounds::default(), &never)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('{'), "{e}");
        assert!(e.contains("PNG"), "{e}");
        assert_eq!(
            human_detail(
                "CRC error: expected 0x1 have 0x2 while decoding ChunkType { type: IHDR, critical: true } chunk."
            ),
            Some("CRC error: expected 0x1 have 0x2 while decoding IHDR chunk".to_owned())
        );
        assert_eq!(
            human_detail("Corrupt deflate stream. BadLiteral { x: 1 }"),
            None
        );
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
        let mut bmp = b"BM".to_vec();
        bmp.extend_from_slice(&[0; 12]);
        bmp.extend_from_slice(&40u32.to_le_bytes());
        for (bytes, mime) in [
            (bmp, "image/bmp"),
            (b"II*\0\x08\0\0\0".to_vec(), "image/tiff"),
            (b"MM\0*\0\0\0\x08".to_vec(), "image/tiff"),
            (b"\0\0\x01\0\x01\0\x10\x10".to_vec(), "image/x-icon"),
            (b"\0\0\0\x1cftypavif\0\0\0\0".to_vec(), "image/avif"),
        ] {
            assert_eq!(sniff_mime(&bytes), Some(mime));
            assert!(has_signature(mime));
            assert_eq!(
                image::guess_format(&bytes).ok().map(|f| f.to_mime_type()),
                Some(mime)
            );
        }
        assert_eq!(sniff_mime(&png(4, 4, true)), Some("image/png"));
        for text in [
            &b"BMW service notes"[..],
            b"# A note\n",
            b"PNG but not really",
        ] {
            assert_eq!(sniff_mime(text), None, "{text:?}");
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
