//! Images the model can see, through the real binary over stdio: `read_attachment` sends an
//! image as image content (scaled down to its bounds, the original's facts in the structured
//! part), SVG as text, `format: original` as bytes; a damaged or hostile image is reported, never
//! decoded past its budget; `read_note` with `include_images` sends a note's embedded images,
//! bounded, each file once.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use image::codecs::png::PngEncoder;
use image::{ImageBuffer, Rgb, Rgba};
use serde_json::{Value, json};

use crate::common::{Server, sha256_hex as sha, write_tree};

fn png(w: u32, h: u32) -> Vec<u8> {
    let img = ImageBuffer::from_fn(w, h, |x, y| Rgb([(x % 251) as u8, (y % 241) as u8, 90]));
    let mut out = Vec::new();
    img.write_with_encoder(PngEncoder::new(&mut out)).unwrap();
    out
}

fn png_with_alpha(w: u32, h: u32) -> Vec<u8> {
    let img = ImageBuffer::from_fn(w, h, |x, _| Rgba([200, 10, 10, (x % 256) as u8]));
    let mut out = Vec::new();
    img.write_with_encoder(PngEncoder::new(&mut out)).unwrap();
    out
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

/// A PNG chunk of `kind` holding `data`.
fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(&out[4..]).to_be_bytes());
    out
}

/// A PNG whose header (checksum and all) claims `w` x `h` pixels, with no pixel data.
fn png_header_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut bytes = png(1, 1);
    bytes[16..20].copy_from_slice(&w.to_be_bytes());
    bytes[20..24].copy_from_slice(&h.to_be_bytes());
    let crc = crc32(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    bytes
}

include!("common/zlib.rs");

/// A 64x64 PNG whose colour profile (iCCP) is 4 MB of zlib that inflates to 4 GiB.
fn png_with_profile_bomb() -> Vec<u8> {
    let mut icc = b"icc\0\0".to_vec();
    icc.extend_from_slice(&zlib_zeros(4 << 30));
    let mut bytes = png(64, 64);
    bytes.splice(33..33, chunk(b"iCCP", &icc));
    bytes
}

/// A `side` x `side` RGB PNG of black pixels in a few hundred KB: every row is filter 0 and
/// zeros, so its image data is one stream of zeros (`side` 3000: 27 MB decoded from 26 KB).
fn png_of_zeros(side: u32) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = side.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    bytes.extend_from_slice(&chunk(b"IHDR", &ihdr));
    let raw = u64::from(side) * (u64::from(side) * 3 + 1);
    bytes.extend_from_slice(&chunk(b"IDAT", &zlib_zeros(raw)));
    bytes.extend_from_slice(&chunk(b"IEND", b""));
    bytes
}

/// The image content blocks of a reply: (MIME type, decoded bytes).
fn images_of(raw: &str) -> Vec<(String, Vec<u8>)> {
    let v: Value = serde_json::from_str(raw).unwrap();
    v["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "image")
        .map(|c| {
            (
                c["mimeType"].as_str().unwrap().to_owned(),
                STANDARD.decode(c["data"].as_str().unwrap()).unwrap(),
            )
        })
        .collect()
}

fn dims(bytes: &[u8]) -> (u32, u32) {
    let img = image::load_from_memory(bytes).expect("the image sent decodes");
    (img.width(), img.height())
}

fn vault(dir: &Path) {
    write_tree(
        dir,
        &[
            (
                "Pics/diagram.svg",
                "<svg xmlns='http://www.w3.org/2000/svg'><rect/></svg>",
            ),
            ("Card.md", "---\ncover: \"[[small.png]]\"\n---\nA card.\n"),
            (
                "Board.md",
                "# Board\n![[wide.png]] and ![small](Pics/small.png)\n![[nowhere.png]]\n\
                 ![[wide.png|200]] ![[diagram.svg]] ![[notes.pdf]] ![](https://example.com/x.png)\n",
            ),
        ],
    );
    std::fs::write(dir.join("Pics/wide.png"), png(3000, 1000)).unwrap();
    std::fs::write(dir.join("Pics/small.png"), png(40, 30)).unwrap();
    std::fs::write(dir.join("Pics/clear.png"), png_with_alpha(2000, 100)).unwrap();
    std::fs::write(
        dir.join("Pics/bomb.png"),
        png_header_claiming(60_000, 60_000),
    )
    .unwrap();
    let cut = png(200, 200);
    std::fs::write(dir.join("Pics/cut.png"), &cut[..cut.len() / 2]).unwrap();
}

#[tokio::test]
async fn an_image_is_sent_as_a_picture_scaled_to_its_bounds_with_the_originals_facts() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let wide = std::fs::read(tmp.path().join("Pics/wide.png")).unwrap();
    let s = Server::start(tmp.path()).await;

    let r = s.call("read_attachment", json!({"path": "wide.png"})).await;
    assert!(!r.is_error, "{}", r.raw);
    let info = &r.structured;
    assert_eq!(info["path"], "Pics/wide.png");
    assert_eq!(info["sha256"], sha(&wide), "the original's version");
    assert_eq!(info["size"], wide.len());
    assert_eq!(info["sent_as"], "image");
    assert_eq!(
        (&info["image"]["width"], &info["image"]["height"]),
        (&json!(3000), &json!(1000))
    );
    let sent = images_of(&r.raw);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "image/jpeg");
    assert_eq!(dims(&sent[0].1), (1568, 523), "the longest side fits 1568");
    assert_eq!(info["image"]["sent_width"], 1568);
    assert_eq!(info["image"]["sent_bytes"], sent[0].1.len());
    assert!(sent[0].1.len() <= 1 << 20);
    assert!(
        !r.raw.contains("\"resource\""),
        "no raw bytes beside the picture"
    );

    // A smaller bound; transparency stays PNG.
    let r = s
        .call(
            "read_attachment",
            json!({"path": "wide.png", "max_pixels": 300}),
        )
        .await;
    assert_eq!(dims(&images_of(&r.raw)[0].1), (300, 100));
    let r = s
        .call(
            "read_attachment",
            json!({"path": "Pics/clear.png", "max_pixels": 500}),
        )
        .await;
    let sent = images_of(&r.raw);
    assert_eq!(
        (sent[0].0.as_str(), dims(&sent[0].1)),
        ("image/png", (500, 25))
    );

    // An image that fits is sent byte for byte.
    let small = std::fs::read(tmp.path().join("Pics/small.png")).unwrap();
    let r = s
        .call("read_attachment", json!({"path": "small.png"}))
        .await;
    assert_eq!(images_of(&r.raw), vec![("image/png".to_owned(), small)]);
    assert_eq!(r.structured["image"]["resized"], false);

    // `original`: the bytes, as an embedded resource.
    let r = s
        .call(
            "read_attachment",
            json!({"path": "wide.png", "format": "original"}),
        )
        .await;
    assert_eq!(r.structured["sent_as"], "resource");
    assert!(images_of(&r.raw).is_empty());
    let v: Value = serde_json::from_str(&r.raw).unwrap();
    let blob = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| c["resource"]["blob"].as_str())
        .expect("a blob");
    assert_eq!(STANDARD.decode(blob).unwrap(), wide);

    // SVG is text.
    let r = s
        .call("read_attachment", json!({"path": "diagram.svg"}))
        .await;
    assert_eq!(r.structured["sent_as"], "text");
    assert!(r.text.contains("<svg xmlns="), "{}", r.text);

    let msg = s
        .err(
            "read_attachment",
            json!({"path": "wide.png", "max_pixels": 8}),
        )
        .await;
    assert!(
        msg.contains("`max_pixels` must be a whole number from 16 to 8192"),
        "{msg}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_hostile_or_damaged_image_is_reported_and_its_bytes_sent_never_decoded_past_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let s = Server::start(tmp.path()).await;
    // 3.6 billion pixels promised by a 69-byte file: refused from the header.
    let r = s
        .call("read_attachment", json!({"path": "Pics/bomb.png"}))
        .await;
    assert!(!r.is_error, "{}", r.raw);
    assert_eq!(r.structured["sent_as"], "resource");
    let why = r.structured["image_error"].as_str().unwrap();
    assert!(
        why.contains("60000x60000") && why.contains("50000000-pixel budget"),
        "{why}"
    );
    let r = s
        .call("read_attachment", json!({"path": "Pics/cut.png"}))
        .await;
    assert_eq!(r.structured["sent_as"], "resource");
    assert!(
        r.structured["image_error"]
            .as_str()
            .unwrap()
            .starts_with("cannot be decoded"),
        "{}",
        r.raw
    );
    // The server goes on answering.
    let r = s
        .call("read_attachment", json!({"path": "Pics/small.png"}))
        .await;
    assert_eq!(r.structured["sent_as"], "image");
    s.stop().await;
}

#[tokio::test]
async fn read_note_sends_the_images_its_text_embeds_each_once_and_says_what_it_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s.call("read_note", json!({"path": "Board"})).await;
    assert!(r.structured.get("images").is_none());
    assert!(images_of(&r.raw).is_empty(), "no images unless asked");

    let r = s
        .call(
            "read_note",
            json!({"path": "Board", "include_images": true}),
        )
        .await;
    assert!(!r.is_error, "{}", r.raw);
    let report = r.structured["images"].as_array().unwrap();
    let rows: Vec<(String, Value, Value)> = report
        .iter()
        .map(|i| {
            (
                i["embed"].as_str().unwrap().to_owned(),
                i["path"].clone(),
                i["skipped"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        [
            "![[wide.png]]",
            "![small](Pics/small.png)",
            "![[nowhere.png]]",
            "![[wide.png|200]]",
            "![[diagram.svg]]"
        ],
        "image embeds only, in order (not the PDF, not the web image)"
    );
    assert_eq!(rows[0].1, "Pics/wide.png");
    assert!(rows[0].2.is_null() && rows[1].2.is_null());
    assert_eq!(rows[2].2, "no such file in the vault");
    assert_eq!(rows[3].2, "sent once, above");
    assert!(rows[4].2.as_str().unwrap().contains("SVG"), "{:?}", rows[4]);
    let sent = images_of(&r.raw);
    assert_eq!(sent.len(), 2);
    assert_eq!(dims(&sent[0].1), (1568, 523));
    assert_eq!(dims(&sent[1].1), (40, 30));
    assert_eq!(report[0]["sent"]["sent_width"], 1568);

    // An image a property names, as a Bases card's cover.
    let r = s
        .call("read_note", json!({"path": "Card", "include_images": true}))
        .await;
    assert_eq!(
        r.structured["images"][0]["path"], "Pics/small.png",
        "{}",
        r.raw
    );
    assert_eq!(images_of(&r.raw).len(), 1);

    // Only the part read: lines 1 to 1 embed nothing.
    let r = s
        .call(
            "read_note",
            json!({"path": "Board", "include_images": true, "lines": "1"}),
        )
        .await;
    assert_eq!(r.structured["images"], json!([]));
    s.stop().await;
}

#[tokio::test]
async fn a_note_with_many_images_sends_at_most_four_and_reports_at_most_sixteen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..20 {
        std::fs::create_dir_all(tmp.path().join("img")).unwrap();
        std::fs::write(tmp.path().join(format!("img/p{i}.png")), png(30 + i, 20)).unwrap();
        text.push_str(&format!("![[p{i}.png]]\n"));
    }
    write_tree(tmp.path(), &[("Many.md", text.as_str())]);
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s
        .call("read_note", json!({"path": "Many", "include_images": true}))
        .await;
    let sent = images_of(&r.raw);
    assert_eq!(
        sent.iter().map(|(_, b)| dims(b).0).collect::<Vec<_>>(),
        [30, 31, 32, 33]
    );
    let report = r.structured["images"].as_array().unwrap();
    assert_eq!(report.len(), 16);
    assert!(
        report[4]["skipped"]
            .as_str()
            .unwrap()
            .contains("over the 4 images"),
        "{}",
        report[4]
    );
    assert_eq!(r.structured["images_omitted"], 4);
    s.stop().await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_png_whose_colour_profile_inflates_to_gigabytes_is_read_and_the_server_lives() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let bomb = png_with_profile_bomb();
    assert!(bomb.len() < 5 << 20, "{}", bomb.len());
    std::fs::write(tmp.path().join("Pics/profile.png"), &bomb).unwrap();
    write_tree(tmp.path(), &[("Profiled.md", "![[profile.png]]\n")]);
    let s = Server::start(tmp.path()).await;
    let pid = s.pid();
    s.wait_index_ready().await;
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = status_kib(pid, "VmHWM:");
    // The profile is cut at the metadata cap (and not needed): the picture is sent.
    let r = s
        .call("read_attachment", json!({"path": "Pics/profile.png"}))
        .await;
    let rise = status_kib(pid, "VmHWM:").saturating_sub(before);
    println!(
        "one read of a 4 GiB colour profile: server VmHWM rose {} MiB",
        rise / 1024
    );
    // The file, the chunk's buffer, 16 MiB of profile at most (408 MiB before they were
    // bounded, 23 measured after).
    assert!(rise < 64 << 10, "VmHWM rose {rise} KiB");
    assert!(!r.is_error, "{}", r.raw);
    assert_eq!(r.structured["sent_as"], "image", "{}", r.structured);
    assert_eq!(r.structured["image"]["width"], 64);
    assert_eq!(dims(&images_of(&r.raw)[0].1), (64, 64));
    // And with a note's text.
    let r = s
        .call(
            "read_note",
            json!({"path": "Profiled", "include_images": true}),
        )
        .await;
    assert!(!r.is_error, "{}", r.raw);
    assert_eq!(images_of(&r.raw).len(), 1, "{}", r.structured["images"]);
    // The server goes on answering.
    let r = s
        .call("read_attachment", json!({"path": "Pics/small.png"}))
        .await;
    assert_eq!(r.structured["sent_as"], "image");
    s.stop().await;
}

/// A line of `/proc/<pid>/status`, in KiB.
#[cfg(target_os = "linux")]
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn sixteen_concurrent_reads_of_hostile_images_keep_the_server_alive_within_a_gib() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    // Eight colour-profile bombs (4 MB inflating to 4 GiB each) and eight images of 27 MB of
    // pixels in 26 KB: without a bound, each of the first costs 400 MB and more.
    let bomb = png_with_profile_bomb();
    let zeros = png_of_zeros(3000);
    for i in 0..8 {
        std::fs::write(tmp.path().join(format!("Pics/bomb{i}.png")), &bomb).unwrap();
        std::fs::write(tmp.path().join(format!("Pics/zeros{i}.png")), &zeros).unwrap();
    }
    let s = Server::start(tmp.path()).await;
    let pid = s.pid();
    s.wait_index_ready().await;
    // The high-water mark starts again from what the server holds now.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = status_kib(pid, "VmHWM:");
    let started = std::time::Instant::now();
    let s = std::sync::Arc::new(s);
    let reads: Vec<_> = (0..16)
        .map(|i| {
            let s = std::sync::Arc::clone(&s);
            let path = if i % 2 == 0 {
                format!("Pics/bomb{}.png", i / 2)
            } else {
                format!("Pics/zeros{}.png", i / 2)
            };
            tokio::spawn(async move {
                (
                    path.clone(),
                    s.call("read_attachment", json!({"path": path})).await,
                )
            })
        })
        .collect();
    let (mut sent, mut busy) = (0, 0);
    for read in reads {
        let (path, r) = read.await.unwrap();
        if r.is_error {
            // Refused while the pool stays drawn down by the others: `busy`, never a crash.
            assert_eq!(r.error["code"], "busy", "{path}: {}", r.raw);
            busy += 1;
        } else {
            assert_eq!(r.structured["sent_as"], "image", "{path}: {}", r.structured);
            sent += 1;
        }
    }
    let peak = status_kib(pid, "VmHWM:");
    let rise = peak.saturating_sub(before);
    println!(
        "16 concurrent hostile reads in {:.1} s: {sent} sent, {busy} busy; server VmHWM {before} \
         KiB before, {peak} KiB after: rose {} MiB",
        started.elapsed().as_secs_f64(),
        rise / 1024
    );
    assert!(sent > 0, "some reads get through");
    assert!(rise <= 1 << 20, "VmHWM rose {rise} KiB, over 1 GiB");
    // Alive, and every image readable once the others are done.
    for path in ["Pics/bomb0.png", "Pics/zeros7.png", "Pics/small.png"] {
        let r = s.call("read_attachment", json!({"path": path})).await;
        assert_eq!(r.structured["sent_as"], "image", "{path}: {}", r.raw);
    }
}

#[tokio::test]
async fn a_file_named_as_an_image_is_labelled_by_its_bytes_and_a_decode_error_is_a_sentence() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    std::fs::write(
        tmp.path().join("Pics/readme.png"),
        "Not a picture: notes kept under an image's name.\n",
    )
    .unwrap();
    let mut jpeg = Vec::new();
    ImageBuffer::from_fn(32, 16, |x, y| Rgb([x as u8, y as u8, 7]))
        .write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
            &mut jpeg, 85,
        ))
        .unwrap();
    std::fs::write(tmp.path().join("Pics/photo.png"), &jpeg).unwrap();
    // The image data's chunk renamed "IDA\0".
    let mut bad = png(8, 8);
    let at = bad.windows(4).position(|w| w == b"IDAT").unwrap();
    let len = u32::from_be_bytes(bad[at - 4..at].try_into().unwrap()) as usize;
    bad[at + 3] = 0;
    let crc = crc32(&bad[at..at + 4 + len]);
    bad[at + 4 + len..at + 8 + len].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(tmp.path().join("Pics/renamed.png"), &bad).unwrap();
    let s = Server::start(tmp.path()).await;

    // Text under a `.png` name is text, sent as its bytes, with no image error.
    for format in ["auto", "original"] {
        let r = s
            .call(
                "read_attachment",
                json!({"path": "Pics/readme.png", "format": format}),
            )
            .await;
        assert!(!r.is_error, "{}", r.raw);
        assert_eq!(r.structured["mime_type"], "text/plain", "{format}");
        assert_eq!(r.structured["sent_as"], "resource");
        assert!(
            r.structured.get("image_error").is_none(),
            "{}",
            r.structured
        );
        let v: Value = serde_json::from_str(&r.raw).unwrap();
        let resource = v["content"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|c| c.get("resource"))
            .expect("a resource");
        assert_eq!(resource["mimeType"], "text/plain");
    }
    // A JPEG under a `.png` name is a JPEG.
    let r = s
        .call("read_attachment", json!({"path": "Pics/photo.png"}))
        .await;
    assert_eq!(r.structured["mime_type"], "image/jpeg", "{}", r.structured);
    assert_eq!(images_of(&r.raw), vec![("image/jpeg".to_owned(), jpeg)]);
    // A decoder's error reads as a sentence, never as a Rust structure.
    let r = s
        .call("read_attachment", json!({"path": "Pics/renamed.png"}))
        .await;
    let why = r.structured["image_error"].as_str().unwrap();
    assert!(
        why.starts_with("cannot be decoded: damaged PNG data") && why.contains("IDA"),
        "{why}"
    );
    assert!(!why.contains('{') && !why.contains("ChunkType"), "{why}");
    s.stop().await;
}
