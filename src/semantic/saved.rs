//! The vector store as bytes, for the embeddings cache (a file in the vault's index cache
//! folder, outside the vault): a restart reloads it and re-embeds only the notes whose version
//! stamp changed. No I/O here; the engine reads and writes the file through the capability layer.
//!
//! Nothing in the file is trusted beyond what it proves: a magic line and format number, the
//! fingerprint of the model that made the vectors (another model's vectors are another space),
//! the dimensions, a sha256 over everything before it, and then every count checked against the
//! bytes left, every path parsed as a vault path, every heading UTF-8 and bounded, every scale
//! finite. A file that fails any check is discarded whole and every note is embedded again.
//!
//! Layout (little-endian): magic, format (u32), model fingerprint (32 bytes), dimensions (u32),
//! boilerplate lines (u32) and their keys (u64 each, ascending: the lines left out of what was
//! embedded, [`super::chunk::Boilerplate`]), notes (u32); per note: path (u16 length + bytes), stamp (u64), sections (u16); per section:
//! line (u32), heading (u16 length + bytes, `u16::MAX` for none), scale (f32), `dims` codes
//! (i8); then the sha256 of all of the above.

use std::io::{self, Read, Write};

use sha2::{Digest, Sha256};

use super::chunk::{Boilerplate, MAX_CHUNKS};
use super::store::{Section, VectorStore};
use crate::vault::VaultPath;

/// The file's first bytes.
pub const MAGIC: &[u8; 20] = b"capvault embeddings\n";
/// Bump when the layout or what goes into a vector changes (chunking, context, pooling).
pub const FORMAT: u32 = 3;
/// Longest heading kept.
const MAX_HEADING: usize = 4096;
/// Marks a section without a heading.
const NO_HEADING: u16 = u16::MAX;

/// Why a saved store was not used (shown in `vault_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SavedError {
    /// The file ends before its body does.
    #[error("the embeddings cache is cut short")]
    Truncated,
    /// The digest after the body is not the body's.
    #[error("the embeddings cache fails its checksum")]
    Checksum,
    /// A name longer than any written.
    #[error("the embeddings cache holds an over-long name")]
    LongName,
    /// A name that is not UTF-8.
    #[error("the embeddings cache holds a name that is not UTF-8")]
    NameNotUtf8,
    /// Not this format's magic bytes.
    #[error("not an embeddings cache")]
    NotACache,
    /// Another version of the format.
    #[error("the embeddings cache was written by another version")]
    OtherVersion,
    /// Made by another model (its fingerprint).
    #[error("the embeddings cache was made by another model")]
    OtherModel,
    /// Vectors of another width.
    #[error("the embeddings cache has other dimensions than the model")]
    OtherDimensions,
    /// The boilerplate keys are not sorted.
    #[error("the embeddings cache's boilerplate lines are out of order")]
    BoilerplateOrder,
    /// A path that is not a note's.
    #[error("the embeddings cache names a path that is not a note")]
    NotANote,
    /// A note with no sections or too many.
    #[error("the embeddings cache holds a note with a bad section count")]
    SectionCount,
    /// A scale that is negative or not a finite number.
    #[error("the embeddings cache holds a bad scale")]
    BadScale,
    /// One note twice.
    #[error("the embeddings cache names a note twice")]
    NoteTwice,
    /// Bytes after the last note.
    #[error("the embeddings cache has bytes past its end")]
    TrailingBytes,
}

/// The bytes of `store`, made by the model with `fingerprint` (see [`write`](fn@write)).
pub fn encode(store: &VectorStore, fingerprint: &[u8; 32], boilerplate: &Boilerplate) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write(store, fingerprint, boilerplate, &mut out);
    out
}

/// Writes the bytes of `store`, made by the model with `fingerprint`, to `out` as they are
/// made: saving a hundred thousand notes' vectors never holds a second copy of them in memory.
pub fn write(
    store: &VectorStore,
    fingerprint: &[u8; 32],
    boilerplate: &Boilerplate,
    out: impl Write,
) -> io::Result<()> {
    let dims = store.dims();
    let mut w = io::BufWriter::with_capacity(1 << 16, Summed::new(out));
    w.write_all(MAGIC)?;
    w.write_all(&FORMAT.to_le_bytes())?;
    w.write_all(fingerprint)?;
    w.write_all(&(dims as u32).to_le_bytes())?;
    let mut keys: Vec<u64> = boilerplate.iter().copied().collect();
    keys.sort_unstable();
    w.write_all(&(keys.len() as u32).to_le_bytes())?;
    for k in keys {
        w.write_all(&k.to_le_bytes())?;
    }
    let notes = store.notes_sorted();
    w.write_all(&(notes.len() as u32).to_le_bytes())?;
    let mut row_bytes = Vec::with_capacity(dims);
    for (path, note) in notes {
        put_str(&mut w, path.as_str())?;
        w.write_all(&note.stamp.to_le_bytes())?;
        w.write_all(&(note.sections.len() as u16).to_le_bytes())?;
        for (i, (section, scale)) in note.sections.iter().zip(note.scales).enumerate() {
            let row = note.row(i);
            w.write_all(&section.line.to_le_bytes())?;
            match &section.heading {
                Some(h) => put_str(&mut w, h)?,
                None => w.write_all(&NO_HEADING.to_le_bytes())?,
            }
            w.write_all(&scale.to_le_bytes())?;
            row_bytes.clear();
            row_bytes.extend(row.iter().map(|&c| c as u8));
            w.write_all(&row_bytes)?;
        }
    }
    let summed = w.into_inner().map_err(io::IntoInnerError::into_error)?;
    let digest = summed.hash.finalize();
    let mut out = summed.inner;
    out.write_all(&digest)?;
    out.flush()
}

/// A writer that passes bytes on and keeps the sha256 of what it passed.
struct Summed<W> {
    inner: W,
    hash: Sha256,
}

impl<W> Summed<W> {
    fn new(inner: W) -> Self {
        Summed {
            inner,
            hash: Sha256::new(),
        }
    }
}

impl<W: Write> Write for Summed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn put_str(out: &mut impl Write, s: &str) -> io::Result<()> {
    // Paths and headings are far below u16::MAX bytes (paths by the vault's own limits,
    // headings cut by the chunker); cut at a character boundary all the same.
    let mut end = s.len().min(MAX_HEADING);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.write_all(&(end as u16).to_le_bytes())?;
    out.write_all(&s.as_bytes()[..end])
}

const TRUNCATED: SavedError = SavedError::Truncated;
const CHECKSUM: SavedError = SavedError::Checksum;

/// Reads the body of a saved store off the front of a reader, keeping its sha256 and failing
/// past the body's end (the file's length less the digest).
struct Reader<R> {
    inner: R,
    /// Body bytes not yet read.
    left: u64,
    hash: Sha256,
    buf: Vec<u8>,
}

impl<R: Read> Reader<R> {
    fn take(&mut self, n: usize) -> Result<&[u8], SavedError> {
        if n as u64 > self.left {
            return Err(TRUNCATED);
        }
        self.buf.resize(n, 0);
        self.inner
            .read_exact(&mut self.buf)
            .map_err(|_| TRUNCATED)?;
        self.left -= n as u64;
        self.hash.update(&self.buf);
        Ok(&self.buf)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], SavedError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, SavedError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, SavedError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn str(&mut self, len: u16) -> Result<&str, SavedError> {
        if usize::from(len) > MAX_HEADING {
            return Err(SavedError::LongName);
        }
        std::str::from_utf8(self.take(len.into())?).map_err(|_| SavedError::NameNotUtf8)
    }

    /// Checks the digest after the body. When the body was refused before its end, the rest is
    /// read into the sum first: an altered file is reported as failing its checksum, whatever
    /// part of it was altered.
    fn finish(mut self, parsed: Result<(), SavedError>) -> Result<(), SavedError> {
        if parsed.is_err() {
            let mut rest = (&mut self.inner).take(self.left);
            let mut chunk = vec![0u8; 1 << 16];
            loop {
                match rest.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        self.hash.update(&chunk[..n]);
                        self.left -= n as u64;
                    }
                    Err(_) => return Err(TRUNCATED),
                }
            }
            if self.left > 0 {
                return Err(TRUNCATED);
            }
        }
        let mut digest = [0u8; 32];
        self.inner.read_exact(&mut digest).map_err(|_| TRUNCATED)?;
        if self.hash.finalize().as_slice() != digest {
            return Err(CHECKSUM);
        }
        parsed
    }
}

/// The store in `bytes` and the boilerplate lines it was made without, if they are a whole,
/// unaltered save of vectors of `dims` dimensions made by the model with `fingerprint` (see
/// [`read`]).
pub fn decode(
    bytes: &[u8],
    fingerprint: &[u8; 32],
    dims: usize,
) -> Result<(VectorStore, Boilerplate), SavedError> {
    read(bytes, bytes.len() as u64, fingerprint, dims)
}

/// The store in the `len` bytes of `from`, if they are a whole, unaltered save of vectors of
/// `dims` dimensions made by the model with `fingerprint`. The file is read once, front to
/// back, never held whole; nothing read is used before its checksum is proven (the store is
/// built as it is read and returned only then).
pub fn read(
    from: impl Read,
    len: u64,
    fingerprint: &[u8; 32],
    dims: usize,
) -> Result<(VectorStore, Boilerplate), SavedError> {
    let Some(body_len) = len.checked_sub(32) else {
        return Err(TRUNCATED);
    };
    let mut r = Reader {
        inner: io::BufReader::with_capacity(1 << 16, from),
        left: body_len,
        hash: Sha256::new(),
        buf: Vec::new(),
    };
    if r.take(MAGIC.len())? != MAGIC {
        return Err(SavedError::NotACache);
    }
    if r.u32()? != FORMAT {
        return Err(SavedError::OtherVersion);
    }
    let mut store = VectorStore::new(dims);
    let mut boilerplate = Boilerplate::default();
    let parsed = body(&mut r, &mut store, &mut boilerplate, fingerprint, dims);
    r.finish(parsed)?;
    Ok((store, boilerplate))
}

/// The body after the magic and format, into `store`.
fn body<R: Read>(
    r: &mut Reader<R>,
    store: &mut VectorStore,
    boilerplate: &mut Boilerplate,
    fingerprint: &[u8; 32],
    dims: usize,
) -> Result<(), SavedError> {
    if &r.array::<32>()? != fingerprint {
        return Err(SavedError::OtherModel);
    }
    if r.u32()? as usize != dims {
        return Err(SavedError::OtherDimensions);
    }
    let lines = u64::from(r.u32()?);
    // A count past the bytes left is a lie, not an allocation.
    if lines > r.left / 8 {
        return Err(TRUNCATED);
    }
    let mut last = None;
    for _ in 0..lines {
        let k = u64::from_le_bytes(r.array()?);
        if last.is_some_and(|l| l >= k) {
            return Err(SavedError::BoilerplateOrder);
        }
        last = Some(k);
        boilerplate.insert(k);
    }
    let notes = r.u32()? as usize;
    // Each note takes at least 12 bytes: a count past that is a lie, not an allocation.
    if notes as u64 > r.left / 12 {
        return Err(TRUNCATED);
    }
    let mut sections = Vec::new();
    let mut codes = Vec::new();
    let mut scales = Vec::new();
    for _ in 0..notes {
        let len = r.u16()?;
        let path = VaultPath::parse(r.str(len)?).map_err(|_| SavedError::NotANote)?;
        let stamp = u64::from_le_bytes(r.array()?);
        let count = usize::from(r.u16()?);
        if count == 0 || count > MAX_CHUNKS {
            return Err(SavedError::SectionCount);
        }
        sections.clear();
        codes.clear();
        scales.clear();
        for _ in 0..count {
            let line = r.u32()?;
            let heading = match r.u16()? {
                NO_HEADING => None,
                len => Some(Box::from(r.str(len)?)),
            };
            let scale = f32::from_le_bytes(r.array()?);
            if !scale.is_finite() || scale < 0.0 {
                return Err(SavedError::BadScale);
            }
            codes.extend(r.take(dims)?.iter().map(|&b| b as i8));
            scales.push(scale);
            sections.push(Section { line, heading });
        }
        if store.stamp(&path).is_some() {
            return Err(SavedError::NoteTwice);
        }
        store.put(path, stamp, std::mem::take(&mut sections), &codes, &scales);
    }
    if r.left != 0 {
        return Err(SavedError::TrailingBytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: [u8; 32] = [7; 32];

    fn sample() -> VectorStore {
        let mut s = VectorStore::new(3);
        let p = |s: &str| VaultPath::parse(s).unwrap();
        s.insert(
            p("a.md"),
            11,
            vec![
                (
                    Section {
                        line: 1,
                        heading: None,
                    },
                    vec![0.6, 0.8, 0.0],
                ),
                (
                    Section {
                        line: 9,
                        heading: Some("Über uns".into()),
                    },
                    vec![0.0, -1.0, 0.0],
                ),
            ],
        );
        s.insert(
            p("Folder/b.md"),
            u64::MAX,
            vec![(
                Section {
                    line: 3,
                    heading: Some("B".into()),
                },
                vec![0.0, 0.0, 1.0],
            )],
        );
        s
    }

    fn lines() -> Boilerplate {
        [3, u64::MAX, 17].into_iter().collect()
    }

    fn same(a: &VectorStore, b: &VectorStore) -> bool {
        let (x, y) = (a.notes_sorted(), b.notes_sorted());
        a.dims() == b.dims()
            && x.len() == y.len()
            && x.iter().zip(&y).all(|((p, n), (q, m))| {
                p == q
                    && n.sections == m.sections
                    && (0..n.sections.len()).all(|i| n.row(i) == m.row(i))
                    && n.scales == m.scales
                    && n.stamp == m.stamp
            })
    }

    #[test]
    fn a_saved_store_loads_back_exactly() {
        let s = sample();
        let bytes = encode(&s, &FP, &lines());
        let (back, kept) = decode(&bytes, &FP, 3).unwrap();
        assert_eq!(kept, lines());
        assert!(same(&s, &back));
        let q = [0.0, -1.0, 0.0];
        assert_eq!(s.nearest(&q, 2, |_| true), back.nearest(&q, 2, |_| true));
        // The same store saves to the same bytes, whatever the map's order.
        assert_eq!(encode(&back, &FP, &kept), bytes);
        // An empty store too.
        let empty = VectorStore::new(3);
        assert!(
            decode(&encode(&empty, &FP, &Boilerplate::default()), &FP, 3)
                .unwrap()
                .0
                .is_empty()
        );
    }

    #[test]
    fn another_model_or_dimensions_or_format_is_refused() {
        let bytes = encode(&sample(), &FP, &lines());
        assert!(
            decode(&bytes, &[8; 32], 3)
                .unwrap_err()
                .to_string()
                .contains("another model")
        );
        assert!(
            decode(&bytes, &FP, 4)
                .unwrap_err()
                .to_string()
                .contains("dimensions")
        );
        let mut other = bytes.clone();
        other[MAGIC.len()] ^= 1;
        assert!(
            decode(&other, &FP, 3)
                .unwrap_err()
                .to_string()
                .contains("another version")
        );
    }

    #[test]
    fn every_altered_or_cut_file_is_refused_never_loaded() {
        let bytes = encode(&sample(), &FP, &lines());
        // Every single-bit flip past the magic and format fails the checksum (or the magic).
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode(&b, &FP, 3).is_err(), "flip at {i} was accepted");
        }
        for n in 0..bytes.len() {
            assert!(
                decode(&bytes[..n], &FP, 3).is_err(),
                "cut at {n} was accepted"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer, &FP, 3).is_err());
    }

    /// A file whose checksum is right but whose content lies (written by a buggy or hostile
    /// writer that recomputed the digest) is still refused by the structural checks.
    #[test]
    fn a_well_summed_file_with_bad_content_is_refused() {
        let reseal = |mut body: Vec<u8>| {
            let d = Sha256::digest(&body);
            body.extend_from_slice(&d);
            body
        };
        let bytes = encode(&sample(), &FP, &lines());
        let body = bytes[..bytes.len() - 32].to_vec();
        let header = MAGIC.len() + 4 + 32 + 4;
        // A path that escapes the vault.
        let evil = {
            let mut b = body.clone();
            let at = body.windows(4).position(|w| w == b"a.md").unwrap();
            b[at..at + 4].copy_from_slice(b"../x");
            b
        };
        assert!(
            decode(&reseal(evil), &FP, 3)
                .unwrap_err()
                .to_string()
                .contains("path")
        );
        // A note count far beyond the bytes.
        let notes_at = header + 4 + 3 * 8;
        let mut huge = body.clone();
        huge[notes_at..notes_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&reseal(huge), &FP, 3).is_err());
        // A boilerplate count far beyond the bytes, and keys out of order.
        let mut huge = body.clone();
        huge[header..header + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&reseal(huge), &FP, 3).is_err());
        let mut swapped = body.clone();
        let keys = header + 4..header + 4 + 16;
        let (a, b) = (
            body[keys.start..keys.start + 8].to_vec(),
            body[keys.start + 8..keys.end].to_vec(),
        );
        swapped[keys.start..keys.start + 8].copy_from_slice(&b);
        swapped[keys.start + 8..keys.end].copy_from_slice(&a);
        assert!(
            decode(&reseal(swapped), &FP, 3)
                .unwrap_err()
                .to_string()
                .contains("out of order")
        );
        // Trailing bytes inside the sealed body.
        let mut extra = body.clone();
        extra.push(1);
        assert!(
            decode(&reseal(extra), &FP, 3)
                .unwrap_err()
                .to_string()
                .contains("past its end")
        );
    }
}
