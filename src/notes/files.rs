//! The vault as Obsidian sees it, beyond single notes: `vault_info`, canvases,
//! attachments. Replies are assembled here; the tool handlers only parse and call.

use schemars::JsonSchema;
use serde::Serialize;

use super::settings::{VaultSettings, load_settings};
use super::{NoteError, rfc3339, sha256_hex};
use crate::engine::{Engine, IndexStatus, Phase};
use crate::media::image;
use crate::model::Model;
use crate::obsidian::budget::{Pool, Spent};
use crate::obsidian::canvas;
use crate::vault::{Vault, VaultPath};

/// Default cap on attachment size (6 MiB): larger files are refused before reading.
pub const MAX_ATTACHMENT_BYTES: u64 = 6 * 1024 * 1024;

/// Reply of `vault_info`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VaultInfo {
    /// The vault folder's name.
    pub name: String,
    /// Markdown notes (null while the first build runs: see `index`).
    pub notes: Option<usize>,
    /// Canvas files (`.canvas`).
    pub canvases: Option<usize>,
    /// Other files (images, PDFs, audio...).
    pub attachments: Option<usize>,
    /// Distinct tags, parents of nested tags included (`a/b` counts `a` and `a/b`): the
    /// `total` of `list_tags`.
    pub tags: Option<usize>,
    /// The search index and what keeps it fresh: state, documents, build progress, watcher.
    pub index: IndexStatus,
    /// `changes_since`'s cursor for "from now on".
    pub changes_cursor: String,
    /// Settings read from the vault's `.obsidian` folder.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub settings: VaultSettings,
    /// Whether the write tools are enabled (the server runs with `--write`).
    pub writes_enabled: bool,
    /// The folders writes are confined to (`--write-scope`); empty: the whole vault.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write_scopes: Vec<String>,
    /// The largest file capvault reads, in bytes.
    pub max_file_size: u64,
    /// When the parsed model was last brought up to date (RFC 3339).
    pub model_updated: Option<String>,
    /// How long the first full parse of the vault took, in milliseconds.
    pub model_build_ms: Option<u64>,
    /// What the Landlock sandbox enforces: state, abi, filesystem, network.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub sandbox: Option<crate::vault::sandbox::Report>,
    /// The embedding model (name, revision, dimensions) and how far embedding is, or with
    /// `--semantic` and no model, `state: unavailable`, why and the ways out; absent without
    /// `--embedding-model` or `--semantic`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Embedding>,
    /// With `--index-pdfs`: PDFs and pages whose text search covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdfs: Option<crate::engine::pdfs::PdfStatus>,
}

/// A canvas file node and where it leads.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CanvasFile {
    /// The node's id.
    pub node: String,
    /// The `file` field as written.
    pub file: String,
    /// The vault path it opens, or null when missing.
    pub resolved: Option<String>,
}

/// Reply of `read_canvas`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CanvasReply {
    /// Vault-relative path.
    pub path: String,
    /// The document, validated against JSON Canvas 1.0.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub canvas: canvas::Canvas,
    /// Every file node, resolved against the vault.
    pub files: Vec<CanvasFile>,
    /// SHA-256 of the file.
    pub sha256: String,
    /// The text cards that hide text from their reader (their text follows `--hidden-text`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Vec<CanvasHidden>>,
    /// Where the text came from, when not the vault's own (`clipped`, `shared`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::obsidian::provenance::Provenance>,
}

/// Structured part of `read_attachment`'s reply; the content is an image the model sees, SVG
/// text, or the bytes as an embedded resource (`sent_as`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct AttachmentInfo {
    /// Vault-relative path.
    pub path: String,
    /// MIME type guessed from the extension.
    pub mime_type: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes.
    pub sha256: String,
    /// Last modification time, RFC 3339 (UTC).
    pub modified: String,
    /// `image` (image content, scaled down to fit when needed), `text` (an SVG's markup) or
    /// `resource` (the original bytes).
    pub sent_as: &'static str,
    /// For an image sent as image content: its size and what was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageFacts>,
    /// Why an image could not be shown (damaged, over the pixel budget): its bytes were sent
    /// instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_error: Option<String>,
    /// For a PDF sent as text: its pages and which were sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdf: Option<PdfFacts>,
    /// Why a PDF's text could not be read (damaged, encrypted, over a bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdf_error: Option<String>,
}

/// A PDF's pages and the ones sent as text.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PdfFacts {
    /// Pages in the document.
    pub page_count: u32,
    /// The pages sent, e.g. `1-12` (each marked `[page N of M]` in the text).
    pub pages_sent: String,
    /// The next page to ask for (`pages`), when the reply stopped at its bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page: Option<u32>,
    /// False for a PDF without a text layer (scanned pages): nothing to read.
    pub has_text: bool,
    /// Pages whose text could not be read.
    #[serde(skip_serializing_if = "is_zero")]
    pub unreadable_pages: u32,
    /// The document's text was cut at the reader's bounds (pages, bytes).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// An image's size and the one sent in its place.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ImageFacts {
    /// The original's width in pixels.
    pub width: u32,
    /// The original's height in pixels.
    pub height: u32,
    /// Width of the image sent.
    pub sent_width: u32,
    /// Height of the image sent.
    pub sent_height: u32,
    /// MIME type of the image sent.
    pub sent_mime_type: &'static str,
    /// Bytes of the image sent.
    pub sent_bytes: usize,
    /// Whether it was scaled down or re-encoded (else the original's bytes were sent).
    pub resized: bool,
}

impl ImageFacts {
    fn of(p: &image::Prepared) -> Self {
        ImageFacts {
            width: p.source.0,
            height: p.source.1,
            sent_width: p.size.0,
            sent_height: p.size.1,
            sent_mime_type: p.mime,
            sent_bytes: p.bytes.len(),
            resized: p.resized,
        }
    }
}

/// How `read_attachment` sends a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentFormat {
    /// Images as image content (scaled down to fit), SVG as text, anything else as bytes.
    #[default]
    Auto,
    /// The original bytes, whatever the file.
    Original,
}

/// What `read_attachment` asks.
#[derive(Debug, Clone)]
pub struct AttachmentRequest {
    /// The file, as typed and parsed.
    pub name: super::locate::Named,
    /// How to send it.
    pub format: AttachmentFormat,
    /// Longest side of an image sent (default [`image::DEFAULT_MAX_SIDE`]).
    pub max_side: Option<u32>,
    /// A PDF's pages to send (`3`, `2-5`, `1,4,7-9`); all, to the reply's bound, by default.
    pub pages: Option<String>,
}

/// The content of `read_attachment`'s reply.
#[derive(Debug)]
pub enum AttachmentBody {
    /// An image to show the model: bytes and MIME type.
    Image(Vec<u8>, &'static str),
    /// Text (an SVG's markup).
    Text(String),
    /// The original bytes.
    Bytes(Vec<u8>),
}

/// `vault_info`'s `embedding`: the model loaded, or why the one asked for is missing.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Embedding {
    /// A model is loaded.
    Loaded(crate::engine::EmbeddingStatus),
    /// `--semantic` was given and no model could be had.
    Unavailable {
        /// `unavailable`.
        state: &'static str,
        /// What went wrong.
        reason: String,
        /// The ways out.
        fix: &'static str,
    },
}

/// The facts `vault_info` reports. Counts are null while the first build runs.
pub fn vault_info(engine: &Engine, writes_enabled: bool) -> Result<VaultInfo, NoteError> {
    let vault = engine.vault();
    // During the first build, answer at once with the build's progress.
    let building = !engine.is_ready() && engine.phase() != Phase::NotStarted;
    let mut info = VaultInfo {
        name: vault.name().to_owned(),
        notes: None,
        canvases: None,
        attachments: None,
        tags: None,
        index: engine.status(),
        changes_cursor: engine.change_log().cursor(),
        settings: load_settings(vault),
        writes_enabled,
        write_scopes: vault.write_scopes().iter().map(|p| p.to_string()).collect(),
        max_file_size: vault.limits().max_read_bytes,
        model_updated: None,
        model_build_ms: None,
        sandbox: crate::vault::sandbox::report().cloned(),
        embedding: match (engine.embedding_status(), engine.embedding_unavailable()) {
            (Some(status), _) => Some(Embedding::Loaded(status)),
            (None, Some(why)) => Some(Embedding::Unavailable {
                state: "unavailable",
                reason: why.to_owned(),
                fix: super::search::MODEL_WAYS_OUT,
            }),
            (None, None) => None,
        },
        pdfs: engine.pdfs().map(|s| s.status()),
    };
    if !building {
        let model = engine.model()?;
        let counts = model.counts();
        info.notes = Some(counts.notes);
        info.canvases = Some(counts.canvases);
        info.attachments = Some(counts.attachments + counts.bases);
        info.tags = Some(super::graph::tag_total(&model));
        info.model_updated = model.refreshed_at().map(rfc3339);
        info.model_build_ms = model.build_time().map(|d| d.as_millis() as u64);
    }
    Ok(info)
}

/// `read_canvas`: the canvas `name` means (`Board` finds `Board.canvas`), as [`read_canvas`]
/// reads it.
pub fn read_canvas_named(
    engine: &crate::engine::Engine,
    name: &super::locate::Named,
) -> Result<CanvasReply, NoteError> {
    let path = super::locate::locate_kind(engine, &name.input, name.path.clone(), "canvas")?;
    let model = engine.model()?;
    let mut reply = read_canvas(engine.vault(), &model, &path)?;
    show_canvas_hidden(&mut reply, engine.options().hidden_text);
    reply.provenance = Some(engine.provenance(&model, &path)).filter(|p| !p.is_own());
    Ok(reply)
}

/// Reports what the canvas's text cards hide from their reader, and shows the cards as the
/// hidden-text policy says (a card is Markdown, scanned as a note is).
fn show_canvas_hidden(reply: &mut CanvasReply, policy: crate::markdown::hidden::Policy) {
    let mut found = Vec::new();
    for node in &mut reply.canvas.nodes {
        if let canvas::NodeKind::Text { text } = &mut node.kind {
            let spans = crate::markdown::hidden_spans(text);
            if let Some(summary) = crate::markdown::hidden::Hidden::of(text, &spans) {
                found.push(CanvasHidden {
                    node: node.id.clone(),
                    kinds: summary.kinds,
                });
                *text = crate::markdown::hidden::apply(text, 0..text.len(), &spans, policy);
            }
        }
    }
    reply.hidden = (!found.is_empty()).then_some(found);
}

/// What one text card of a canvas hides.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CanvasHidden {
    /// The card's node id.
    pub node: String,
    /// Kinds, counts and lines (of the card's text), as `read_note` reports them.
    pub kinds: Vec<crate::markdown::hidden::KindCount>,
}

/// `read_attachment`: the file the request names (as [`super::locate::locate`] finds it), read as
/// [`read_attachment`] reads it and made ready to send: an image decoded within
/// [`image::ImageBounds`] (the request's side) and sent as image content, an SVG as text,
/// anything else, or anything with `format: original`, as its bytes. An image that cannot be
/// decoded is sent as bytes with `image_error` saying why.
pub fn read_attachment_named(
    engine: &crate::engine::Engine,
    req: &AttachmentRequest,
) -> Result<(VaultPath, AttachmentInfo, AttachmentBody), NoteError> {
    let path = super::locate::locate(engine, &req.name.input, req.name.path.clone())?;
    if req.format == AttachmentFormat::Auto && is_pdf_name(path.file_name()) {
        return read_pdf(engine, path, req.pages.as_deref());
    }
    if req.pages.is_some() {
        return Err(NoteError::invalid(
            "pages",
            "`pages` is for a PDF's text; this is not a PDF (or `format` is original)",
        ));
    }
    let (mut info, bytes) = read_attachment(engine.vault(), &path)?;
    if req.format == AttachmentFormat::Original {
        return Ok((path, info, AttachmentBody::Bytes(bytes)));
    }
    if info.mime_type == "image/svg+xml" {
        return Ok(match String::from_utf8(bytes) {
            Ok(text) => {
                info.sent_as = "text";
                (path, info, AttachmentBody::Text(text))
            }
            Err(e) => (path, info, AttachmentBody::Bytes(e.into_bytes())),
        });
    }
    if !info.mime_type.starts_with("image/") && image::sniff(&bytes).is_none() {
        return Ok((path, info, AttachmentBody::Bytes(bytes)));
    }
    let bounds = image::ImageBounds::with_side(req.max_side.unwrap_or(image::DEFAULT_MAX_SIDE));
    let prepared = prepare_image(&bytes, &bounds)
        .map_err(|spent| NoteError::spent(spent, format!("{path}: not decoded now: {spent}")))?;
    match prepared {
        Ok(p) => {
            info.sent_as = "image";
            info.image = Some(ImageFacts::of(&p));
            Ok((path, info, AttachmentBody::Image(p.bytes, p.mime)))
        }
        Err(image::ImageError::Cancelled) => {
            Err(NoteError::Unavailable("the request was cancelled".into()))
        }
        Err(e) => {
            info.image_error = Some(e.to_string());
            Ok((path, info, AttachmentBody::Bytes(bytes)))
        }
    }
}

/// `bytes` made ready to send as an image within `bounds`, the memory its decode may take
/// reserved from the process's pool first ([`Pool::global`], which query evaluations draw from
/// too): [`image::header_cost`] before its header is read, [`image::Opened::cost`] before a pixel
/// is decoded, both held until it is done. `Err` when the pool stays drawn down by other requests
/// ([`Spent::Busy`]); the image's own failure is the inner error.
fn prepare_image(
    bytes: &[u8],
    bounds: &image::ImageBounds,
) -> Result<Result<image::Prepared, image::ImageError>, Spent> {
    prepare_image_in(Pool::global(), bytes, bounds, &super::cancel::requested)
}

/// [`prepare_image`] from `pool`, `stop` checked between the decoder's steps.
fn prepare_image_in(
    pool: &Pool,
    bytes: &[u8],
    bounds: &image::ImageBounds,
    stop: &dyn Fn() -> bool,
) -> Result<Result<image::Prepared, image::ImageError>, Spent> {
    let _header = pool.reserve(image::header_cost(bytes.len() as u64))?;
    let opened = match image::open(bytes, bounds) {
        Ok(opened) => opened,
        Err(e) => return Ok(Err(e)),
    };
    let _decode = pool.reserve(opened.cost())?;
    Ok(opened.prepare(stop))
}

// The largest image's reservations fit the pool, so that one is never refused for its size
// alone (only for what others hold).
const _: () = assert!(
    image::header_cost(MAX_ATTACHMENT_BYTES) + image::MAX_DECODE_ALLOC
        <= crate::obsidian::budget::POOL_BYTES
);

/// Most images `read_note` sends with a note's text.
pub const MAX_NOTE_IMAGES: usize = 4;
/// Most bytes of the images `read_note` sends with a note's text, in all.
pub const MAX_NOTE_IMAGE_BYTES: usize = 4 << 20;
/// Most image embeds `read_note` reports on (sent or not); more are counted in
/// `images_omitted`.
pub const MAX_NOTE_IMAGE_ENTRIES: usize = 16;

/// The extensions Obsidian shows as images.
const IMAGE_EXTENSIONS: [&str; 8] = ["avif", "bmp", "gif", "jpeg", "jpg", "png", "svg", "webp"];

/// An image embedded in a note's text, as `read_note` reports it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NoteImage {
    /// The embed as written, e.g. `![[diagram.png]]`.
    pub embed: String,
    /// The file it resolves to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its size and what was sent, when it was sent (in the order of `images`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<ImageFacts>,
    /// Why it was not sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// An image to send as image content.
#[derive(Debug, Clone)]
pub struct SentImage {
    /// The encoded image.
    pub bytes: Vec<u8>,
    /// Its MIME type.
    pub mime: &'static str,
}

/// The images of a note's text, as [`note_images`] finds them.
#[derive(Debug, Clone, Default)]
pub struct NoteImages {
    /// One entry per image embed, at most [`MAX_NOTE_IMAGE_ENTRIES`].
    pub report: Vec<NoteImage>,
    /// The images to send, in the order of `report`.
    pub sent: Vec<SentImage>,
    /// Image embeds past the ones reported.
    pub omitted: usize,
}

/// The images embedded in `text` (a note's text, or the part of it read) or named by its
/// properties (`cover: "[[photo.jpg]]"`), resolved from `from`
/// as Obsidian resolves embeds and made ready as `read_attachment` makes them: at most
/// [`MAX_NOTE_IMAGES`] sent, [`MAX_NOTE_IMAGE_BYTES`] in all, each at the default bounds; the
/// same file once.
pub fn note_images(engine: &Engine, from: &VaultPath, text: &str) -> Result<NoteImages, NoteError> {
    let model = engine.model()?;
    let parsed = crate::markdown::parse_note(text);
    let mut report: Vec<NoteImage> = Vec::new();
    let mut sent = Vec::new();
    let (mut bytes_sent, mut omitted) = (0usize, 0usize);
    let mut seen = std::collections::HashSet::new();
    let bounds = image::ImageBounds::default();
    for link in &parsed.links {
        // Embeds, and images a property names (a Bases card's `cover: "[[photo.jpg]]"`).
        let shown = matches!(
            link.kind,
            crate::markdown::LinkKind::Embed | crate::markdown::LinkKind::Frontmatter
        );
        if !shown || crate::markdown::is_external_url(link.target()) {
            continue;
        }
        let ext = link
            .target()
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase());
        if !ext.is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.as_str())) {
            continue;
        }
        if report.len() == MAX_NOTE_IMAGE_ENTRIES {
            omitted += 1;
            continue;
        }
        let mut entry = NoteImage {
            embed: link.raw.to_string(),
            path: None,
            sent: None,
            skipped: None,
        };
        let path = match model.resolve(link.target(), Some(from)) {
            crate::model::linkres::Resolution::Found { path, .. } => path,
            crate::model::linkres::Resolution::NotFound => {
                entry.skipped = Some("no such file in the vault".into());
                report.push(entry);
                continue;
            }
        };
        entry.path = Some(path.to_string());
        if !seen.insert(path.clone()) {
            entry.skipped = Some("sent once, above".into());
        } else if sent.len() == MAX_NOTE_IMAGES {
            entry.skipped = Some(format!(
                "over the {MAX_NOTE_IMAGES} images sent with a note; `read_attachment` shows it"
            ));
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
        {
            entry.skipped = Some("an SVG: `read_attachment` returns its text".into());
        } else if cfg!(not(feature = "images")) {
            // Nothing here could decode it: the file is not read at all.
            entry.skipped = Some(format!("{path}: {}", image::ImageError::NotBuilt));
        } else {
            match read_attachment(engine.vault(), &path) {
                Err(e) => entry.skipped = Some(e.to_string()),
                Ok((_, bytes)) => {
                    match prepare_image(&bytes, &bounds) {
                        Err(Spent::Cancelled) | Ok(Err(image::ImageError::Cancelled)) => {
                            return Err(NoteError::Unavailable("the request was cancelled".into()));
                        }
                        // The note's text is still worth sending: this image is left out, and
                        // why is said (`read_attachment` answers `busy` for it).
                        Err(spent) => {
                            entry.skipped = Some(format!("{path}: not decoded now: {spent}"))
                        }
                        Ok(Err(e)) => entry.skipped = Some(format!("{path}: {e}")),
                        Ok(Ok(p)) if bytes_sent + p.bytes.len() > MAX_NOTE_IMAGE_BYTES => {
                            entry.skipped = Some(format!(
                                "over the {MAX_NOTE_IMAGE_BYTES} bytes of images sent with a note; \
                             `read_attachment` shows it"
                            ));
                        }
                        Ok(Ok(p)) => {
                            bytes_sent += p.bytes.len();
                            entry.sent = Some(ImageFacts::of(&p));
                            sent.push(SentImage {
                                bytes: p.bytes,
                                mime: p.mime,
                            });
                        }
                    }
                }
            }
        }
        report.push(entry);
    }
    Ok(NoteImages {
        report,
        sent,
        omitted,
    })
}

/// The canvas at `path`, validated, with every file node resolved against the model.
pub fn read_canvas(
    vault: &Vault,
    model: &Model,
    path: &VaultPath,
) -> Result<CanvasReply, NoteError> {
    if path.extension() != Some("canvas") {
        return Err(NoteError::invalid(
            "path",
            format!("{path}: not a canvas (a `.canvas` file)"),
        ));
    }
    let data = vault.read_file(path)?;
    let doc = canvas::parse_canvas(&data.bytes)
        .map_err(|e| NoteError::invalid("path", format!("{path}: {e}")))?;
    let files = doc
        .file_nodes()
        .map(|(id, file)| CanvasFile {
            node: id.to_owned(),
            file: file.to_owned(),
            resolved: VaultPath::parse(file)
                .ok()
                .filter(|p| model.files().contains_key(p))
                .map(|p| p.to_string()),
        })
        .collect();
    Ok(CanvasReply {
        path: path.to_string(),
        sha256: sha256_hex(&data.bytes),
        canvas: doc,
        files,
        hidden: None,
        provenance: None,
    })
}

/// An attachment's bytes and facts; files over [`MAX_ATTACHMENT_BYTES`] (or the vault's read
/// cap) are refused before a byte is read, never truncated.
pub fn read_attachment(
    vault: &Vault,
    path: &VaultPath,
) -> Result<(AttachmentInfo, Vec<u8>), NoteError> {
    read_attachment_within(vault, path, MAX_ATTACHMENT_BYTES)
}

/// [`read_attachment`] with another size bound (never over the vault's read limit): a PDF
/// whose text is read, not sent, may be as large as a note may.
fn read_attachment_within(
    vault: &Vault,
    path: &VaultPath,
    bound: u64,
) -> Result<(AttachmentInfo, Vec<u8>), NoteError> {
    let meta = vault.stat_file(path)?;
    let limit = bound.min(vault.limits().max_read_bytes);
    if meta.size > limit {
        return Err(NoteError::TooLarge(format!(
            "{path}: is {} bytes, over the {limit}-byte limit for attachments; refused",
            meta.size
        )));
    }
    let data = vault.read_file(path)?;
    if data.bytes.len() as u64 > limit {
        return Err(NoteError::TooLarge(format!(
            "{path}: grew past the {limit}-byte limit while being read"
        )));
    }
    let info = AttachmentInfo {
        path: path.to_string(),
        mime_type: mime_of(path.file_name(), &data.bytes).to_owned(),
        size: data.meta.size,
        sha256: sha256_hex(&data.bytes),
        modified: rfc3339(data.meta.modified),
        sent_as: "resource",
        image: None,
        image_error: None,
        pdf: None,
        pdf_error: None,
    };
    Ok((info, data.bytes))
}

/// The MIME type of a file named `name` holding `bytes`: the bytes' own when they are an image
/// (a JPEG named `.png` is a JPEG), else the name's, unless the name promises an image format
/// whose signature the bytes lack (a text file named `.png` is not a PNG): then `text/plain`
/// when the bytes are text, `application/octet-stream` when not.
fn mime_of(name: &str, bytes: &[u8]) -> &'static str {
    if let Some(mime) = image::sniff_mime(bytes) {
        return mime;
    }
    let named = mime_guess::from_path(name)
        .first_raw()
        .unwrap_or("application/octet-stream");
    if !image::has_signature(named) {
        named
    } else if std::str::from_utf8(bytes).is_ok_and(|t| !t.contains('\0')) {
        "text/plain"
    } else {
        "application/octet-stream"
    }
}

/// Most bytes of a PDF's text one `read_attachment` reply carries; `next_page` says where to
/// go on.
pub const MAX_PDF_REPLY_BYTES: usize = 64 * 1024;
use crate::media::pdf::{MAX_PDF_BYTES, char_floor, is_pdf_name};

/// `read_attachment` for a PDF: its text, page by page, the pages `pages` names (all by
/// default), to [`MAX_PDF_REPLY_BYTES`]. A PDF whose text cannot be read is sent as bytes
/// (when within the attachment bound) with `pdf_error` saying why.
fn read_pdf(
    engine: &Engine,
    path: VaultPath,
    pages: Option<&str>,
) -> Result<(VaultPath, AttachmentInfo, AttachmentBody), NoteError> {
    let wanted = pages.map(parse_pages).transpose()?;
    let (mut info, bytes) = read_attachment_within(engine.vault(), &path, MAX_PDF_BYTES)?;
    info.mime_type = "application/pdf".to_owned();
    let answer = engine.pdf_text(&info.sha256, &bytes);
    let text = match &*answer {
        Ok(text) => text,
        Err(e) => {
            info.pdf_error = Some(e.to_string());
            if bytes.len() as u64 > MAX_ATTACHMENT_BYTES {
                return Err(NoteError::TooLarge(format!(
                    "{path}: its text could not be read ({e}); at {} bytes it is over the \
                     {MAX_ATTACHMENT_BYTES}-byte limit for sending the file itself",
                    bytes.len()
                )));
            }
            return Ok((path, info, AttachmentBody::Bytes(bytes)));
        }
    };
    let (body, facts) = pdf_pages_text(text, wanted.as_deref());
    info.sent_as = "text";
    info.pdf = Some(facts);
    Ok((path, info, AttachmentBody::Text(body)))
}

/// The text of the pages `wanted` names (every page by default), each after a `[page N of M]`
/// line, to [`MAX_PDF_REPLY_BYTES`]; and what was sent.
fn pdf_pages_text(
    text: &crate::media::pdf::PdfText,
    wanted: Option<&[(u32, u32)]>,
) -> (String, PdfFacts) {
    let count = text.page_count;
    let in_range = |n: u32| wanted.is_none_or(|w| w.iter().any(|&(a, b)| a <= n && n <= b));
    let mut body = String::new();
    let mut sent: Vec<u32> = Vec::new();
    let mut next_page = None;
    let mut unread = 0u32;
    for n in (1..=count).filter(|&n| in_range(n)) {
        let Some(page) = text.pages.get(n as usize - 1) else {
            unread += 1;
            continue;
        };
        let head = format!("[page {n} of {count}]\n");
        let room = MAX_PDF_REPLY_BYTES.saturating_sub(body.len());
        if !sent.is_empty() && head.len() + page.len() + 2 > room {
            next_page = Some(n);
            break;
        }
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str(&head);
        let cut = char_floor(page, room.saturating_sub(head.len()));
        body.push_str(&page[..cut]);
        if cut < page.len() {
            body.push_str("\n[... the rest of this page is over the reply's bound]");
        }
        sent.push(n);
    }
    if !text.has_text() {
        let pages = if count == 1 { "page" } else { "pages" };
        body = format!(
            "This PDF has no text layer ({count} {pages}, probably scanned images): there is \
             no text to read. `format: original` returns its bytes."
        );
    } else if sent.is_empty() {
        body = format!("No page of this PDF is in `pages` (it has {count}).");
    }
    if unread > 0 && body.len() < MAX_PDF_REPLY_BYTES {
        body.push_str(&format!(
            "\n\n[{unread} pages past the first {} are not read]",
            text.pages.len()
        ));
    }
    let facts = PdfFacts {
        page_count: count,
        pages_sent: ranges_text(&sent),
        next_page,
        has_text: text.has_text(),
        unreadable_pages: text.unreadable_pages,
        truncated: text.truncated,
    };
    (body, facts)
}

/// Most ranges `pages` may list.
const MAX_PAGE_RANGES: usize = 64;

/// `pages` as ranges of page numbers: `3`, `2-5`, `1,4,7-9` (1-based, inclusive).
fn parse_pages(spec: &str) -> Result<Vec<(u32, u32)>, NoteError> {
    let bad = || {
        NoteError::invalid(
            "pages",
            format!(
                "`pages` must be page numbers and ranges such as `3`, `2-5` or `1,4,7-9`, not `{}`",
                spec.chars().take(40).collect::<String>()
            ),
        )
    };
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: u32 = a.trim().parse().map_err(|_| bad())?;
        let b: u32 = b.trim().parse().map_err(|_| bad())?;
        if a == 0 || b < a || out.len() == MAX_PAGE_RANGES {
            return Err(bad());
        }
        out.push((a, b));
    }
    Ok(out)
}

/// Page numbers in order as ranges: `1-3,7`.
fn ranges_text(pages: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let start = pages[i];
        let mut end = start;
        while i + 1 < pages.len() && pages[i + 1] == end + 1 {
            i += 1;
            end = pages[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(all(test, feature = "images"))]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = ::image::ImageBuffer::from_fn(w, h, |x, y| ::image::Rgb([x as u8, y as u8, 7]));
        let mut out = Vec::new();
        img.write_with_encoder(::image::codecs::png::PngEncoder::new(&mut out))
            .unwrap();
        out
    }

    #[test]
    fn an_image_decode_holds_its_cost_from_the_pool_and_is_refused_busy_when_the_pool_stays_full() {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(64 << 20)));
        let bytes = png(400, 300);
        let bounds = image::ImageBounds::with_side(100);
        let cost =
            image::header_cost(bytes.len() as u64) + image::open(&bytes, &bounds).unwrap().cost();
        // While it decodes, what it may take is held; when it is done, given back.
        let held = std::sync::Mutex::new(0);
        let stop = || {
            let mut h = held.lock().unwrap();
            *h = (*h).max(pool.used());
            false
        };
        let p = prepare_image_in(pool, &bytes, &bounds, &stop)
            .unwrap()
            .unwrap();
        assert_eq!(p.size, (100, 75));
        assert_eq!(*held.lock().unwrap(), cost);
        assert_eq!(pool.used(), 0);
        // Another request holds the pool: refused busy (after waiting), nothing decoded.
        let other = pool.reserve(60 << 20).unwrap();
        let started = std::time::Instant::now();
        let decoded = std::sync::atomic::AtomicBool::new(false);
        let e = prepare_image_in(pool, &bytes, &bounds, &|| {
            decoded.store(true, std::sync::atomic::Ordering::Relaxed);
            false
        });
        assert_eq!(e.unwrap_err(), Spent::Busy);
        assert!(started.elapsed() >= crate::obsidian::budget::POOL_WAIT);
        assert!(!decoded.load(std::sync::atomic::Ordering::Relaxed));
        drop(other);
        assert_eq!(pool.used(), 0);
        // The image's own failure is not the pool's.
        let e = prepare_image_in(pool, b"\x89PNG\r\n\x1a\nxx", &bounds, &|| false);
        assert!(matches!(e, Ok(Err(image::ImageError::Decode(_)))), "{e:?}");
    }

    #[test]
    fn a_file_is_labelled_by_its_bytes_when_its_name_promises_an_image_it_is_not() {
        assert_eq!(mime_of("a.png", &png(2, 2)), "image/png");
        assert_eq!(mime_of("a.png", b"just text\n"), "text/plain");
        assert_eq!(
            mime_of("a.jpg", &[0, 1, 2, 0xFE]),
            "application/octet-stream"
        );
        // A JPEG under a PNG's name, and an image under no image's name.
        assert_eq!(mime_of("a.png", b"\xFF\xD8\xFF\xE0"), "image/jpeg");
        assert_eq!(mime_of("scan.bin", &png(2, 2)), "image/png");
        // Names whose formats have no signature known keep their type.
        assert_eq!(mime_of("a.svg", b"<svg/>"), "image/svg+xml");
        assert_eq!(mime_of("a.md", b"# note"), "text/markdown");
        assert_eq!(mime_of("a.pdf", b"%PDF-1.4"), "application/pdf");
    }
}
