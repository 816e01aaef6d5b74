//! The vectors of every embedded note, by section, and exact nearest-neighbour search over them
//! (a scan: at 100,000 notes it is a few milliseconds, and needs no index to keep in step).
//!
//! Each section's vector is kept as 8-bit integers with one scale (its largest magnitude / 127):
//! a quarter of the memory of `f32`, and a scan that reads a quarter of the bytes. The query is
//! quantised the same way, so the scan multiplies integers; a cosine moves by under 0.01.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use rayon::prelude::*;

use crate::vault::VaultPath;

/// Where a section starts, for a hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// 1-based line.
    pub line: u32,
    /// The heading above it.
    pub heading: Option<Box<str>>,
}

/// One note's sections and their vectors.
#[derive(Debug)]
pub(super) struct NoteVectors {
    pub(super) sections: Box<[Section]>,
    /// `sections.len()` rows of `dims` codes, one after another.
    pub(super) codes: Box<[i8]>,
    /// One scale per section: a code times its scale is the vector's value.
    pub(super) scales: Box<[f32]>,
    /// The note's version the vectors were made from (size, mtime), to skip re-embedding.
    pub(super) stamp: u64,
}

/// A note near a query, with its best section.
#[derive(Debug, Clone, PartialEq)]
pub struct Nearest {
    /// The note.
    pub path: VaultPath,
    /// Cosine similarity of its best section.
    pub score: f32,
    /// That section.
    pub section: Section,
}

/// Every embedded note.
#[derive(Debug)]
pub struct VectorStore {
    pub(super) dims: usize,
    pub(super) notes: HashMap<VaultPath, NoteVectors, foldhash::fast::RandomState>,
}

/// `v` as codes and a scale (`v[i] ≈ codes[i] * scale`).
pub(super) fn quantise(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if !max.is_finite() || max == 0.0 {
        codes.extend(std::iter::repeat_n(0, v.len()));
        return 0.0;
    }
    let scale = max / 127.0;
    codes.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// The dot product of two rows of codes (unscaled). Integer products in sixteen lanes: the
/// compiler turns them into multiply-add instructions on pairs of 16-bit values.
fn dot(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    acc.iter().sum::<i32>() + tail
}

/// A heap entry ordered by score (lowest first out), ties by path (later paths out first).
struct Entry(f32, VaultPath, usize);

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed, so the max-heap pops the worst kept entry.
        o.0.total_cmp(&self.0).then_with(|| self.1.cmp(&o.1))
    }
}

impl VectorStore {
    /// An empty store for vectors of `dims` dimensions.
    pub fn new(dims: usize) -> Self {
        VectorStore {
            dims,
            notes: HashMap::default(),
        }
    }

    /// Notes held.
    pub fn len(&self) -> usize {
        self.notes.len()
    }

    /// True when no note is held.
    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }

    /// Sections held, in all.
    pub fn sections(&self) -> usize {
        self.notes.values().map(|n| n.sections.len()).sum()
    }

    /// The version stamp the note's vectors were made from.
    pub fn stamp(&self, path: &VaultPath) -> Option<u64> {
        self.notes.get(path).map(|n| n.stamp)
    }

    /// Replaces the note's vectors. Sections whose vector has the wrong length are dropped; a
    /// note left with none is removed.
    pub fn insert(&mut self, path: VaultPath, stamp: u64, sections: Vec<(Section, Vec<f32>)>) {
        let dims = self.dims;
        let kept: Vec<(Section, Vec<f32>)> = sections
            .into_iter()
            .filter(|(_, v)| v.len() == dims)
            .collect();
        if kept.is_empty() {
            self.notes.remove(&path);
            return;
        }
        let mut codes = Vec::with_capacity(kept.len() * dims);
        let mut scales = Vec::with_capacity(kept.len());
        let mut heads = Vec::with_capacity(kept.len());
        for (s, v) in kept {
            scales.push(quantise(&v, &mut codes));
            heads.push(s);
        }
        self.notes.insert(
            path,
            NoteVectors {
                sections: heads.into_boxed_slice(),
                codes: codes.into_boxed_slice(),
                scales: scales.into_boxed_slice(),
                stamp,
            },
        );
    }

    /// Forgets a note.
    pub fn remove(&mut self, path: &VaultPath) {
        self.notes.remove(path);
    }

    /// Drops every note `keep` refuses.
    pub fn retain(&mut self, mut keep: impl FnMut(&VaultPath) -> bool) {
        self.notes.retain(|p, _| keep(p));
    }

    /// The note as a whole (the normalised mean of its sections' vectors), if embedded.
    pub fn centroid(&self, path: &VaultPath) -> Option<Vec<f32>> {
        let note = self.notes.get(path)?;
        let mut sum = vec![0f32; self.dims];
        for (row, &scale) in note.codes.chunks_exact(self.dims).zip(&note.scales) {
            for (s, &c) in sum.iter_mut().zip(row) {
                *s += f32::from(c) * scale;
            }
        }
        super::model::normalise(&mut sum).then_some(sum)
    }

    /// The `k` notes whose best section is nearest `query`, best first (ties by path), among
    /// those `keep` accepts. `keep` is asked only about notes that would enter the top `k`
    /// (a few hundred of 100,000), never about every note.
    pub fn nearest(
        &self,
        query: &[f32],
        k: usize,
        mut keep: impl FnMut(&VaultPath) -> bool,
    ) -> Vec<Nearest> {
        if query.len() != self.dims || k == 0 {
            return Vec::new();
        }
        let mut q = Vec::with_capacity(self.dims);
        let q_scale = quantise(query, &mut q);
        // Every note's best section, on all cores; then the top k, filtered, on this thread.
        let dims = self.dims;
        let best: Vec<(f32, &VaultPath, usize)> = self
            .notes
            .par_iter()
            .map(|(path, note)| {
                let (mut best, mut at) = (f32::NEG_INFINITY, 0);
                let rows = note.codes.chunks_exact(dims).zip(&note.scales);
                for (i, (row, &scale)) in rows.enumerate() {
                    let s = dot(&q, row) as f32 * (scale * q_scale);
                    if s > best {
                        (best, at) = (s, i);
                    }
                }
                (best, path, at)
            })
            .collect();
        let mut heap: BinaryHeap<Entry> = BinaryHeap::with_capacity(k + 1);
        for (best, path, at) in best {
            // The filter runs only on notes that would enter the heap.
            if heap.len() == k
                && heap
                    .peek()
                    .is_some_and(|w| best < w.0 || (best == w.0 && *path > w.1))
            {
                continue;
            }
            if !keep(path) {
                continue;
            }
            heap.push(Entry(best, path.clone(), at));
            if heap.len() > k {
                heap.pop();
            }
        }
        let mut out: Vec<Nearest> = heap
            .into_iter()
            .map(|Entry(score, path, at)| {
                let section = self.notes[&path].sections[at].clone();
                Nearest {
                    path,
                    score,
                    section,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.path.cmp(&b.path))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s).unwrap()
    }

    fn sec(line: u32) -> Section {
        Section {
            line,
            heading: None,
        }
    }

    #[test]
    fn the_nearest_notes_come_best_first_by_their_best_section() {
        let mut s = VectorStore::new(2);
        s.insert(
            p("a.md"),
            1,
            vec![(sec(1), vec![1.0, 0.0]), (sec(5), vec![0.0, 1.0])],
        );
        s.insert(p("b.md"), 1, vec![(sec(1), vec![0.6, 0.8])]);
        s.insert(p("c.md"), 1, vec![(sec(1), vec![1.0, 0.0])]);
        let hits = s.nearest(&[0.0, 1.0], 2, |_| true);
        assert_eq!(hits.len(), 2);
        assert_eq!((hits[0].path.as_str(), hits[0].section.line), ("a.md", 5));
        assert_eq!(hits[1].path.as_str(), "b.md");
        // Ties by path; the filter is honoured.
        let hits = s.nearest(&[1.0, 0.0], 5, |p| p.as_str() != "b.md");
        let paths: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(paths, ["a.md", "c.md"]);
        s.remove(&p("a.md"));
        assert_eq!(s.len(), 2);
        assert_eq!(s.sections(), 2);
    }

    #[test]
    fn the_top_k_matches_a_full_sort_whatever_the_order() {
        let mut s = VectorStore::new(3);
        let mut all = Vec::new();
        for i in 0..200u32 {
            let x = ((i * 37) % 101) as f32 / 101.0;
            let mut v = vec![x, 1.0 - x, 0.5];
            crate::semantic::model::normalise(&mut v);
            let path = p(&format!("n{i:03}.md"));
            s.insert(path.clone(), 1, vec![(sec(1), v.clone())]);
            // The store ranks by the quantised vectors: the full sort does too.
            let (mut q, mut codes) = (Vec::new(), Vec::new());
            let q_scale = quantise(&[1.0, 0.0, 0.0], &mut q);
            let scale = quantise(&v, &mut codes);
            all.push((dot(&q, &codes) as f32 * (scale * q_scale), path));
        }
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let hits = s.nearest(&[1.0, 0.0, 0.0], 17, |_| true);
        let want: Vec<&VaultPath> = all.iter().take(17).map(|(_, p)| p).collect();
        let got: Vec<&VaultPath> = hits.iter().map(|h| &h.path).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn quantised_vectors_keep_their_cosines() {
        // Deterministic pseudo-random unit vectors of 256 dimensions.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        for _ in 0..50 {
            let mut a: Vec<f32> = (0..256).map(|_| next()).collect();
            let mut b: Vec<f32> = (0..256).map(|_| next() + a[0]).collect();
            crate::semantic::model::normalise(&mut a);
            crate::semantic::model::normalise(&mut b);
            let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let (mut qa, mut qb) = (Vec::new(), Vec::new());
            let scale = quantise(&a, &mut qa) * quantise(&b, &mut qb);
            let approx = dot(&qa, &qb) as f32 * scale;
            assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        }
        // A zero vector stays zero rather than dividing by zero.
        let mut codes = Vec::new();
        assert_eq!(quantise(&[0.0; 4], &mut codes), 0.0);
        assert_eq!(codes, [0; 4]);
    }
}
