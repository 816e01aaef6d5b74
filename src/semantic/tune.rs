//! Tuning a distilled static model on a corpus (`capvault model import --corpus VAULT`).
//!
//! Distillation gives every token the vector the transformer gives it alone. In a text, though,
//! the transformer reads each word in its context, and a static model that only averages
//! lone-token vectors drifts from it, worst on short texts such as queries. Tuning closes part of
//! that gap with the transformer as the teacher: it embeds a corpus of texts (the sections of a
//! vault, and short runs of words taken from them, which look like queries), and the token rows
//! are fitted so that the sum of a text's rows points where the transformer's vector of that
//! text points (cosine loss, Adam, minibatches). Rows of tokens the corpus never uses keep their
//! distilled values.
//!
//! The fit is deterministic: a fixed shuffle, and per-text work in parallel but summed in order.

use rayon::prelude::*;

/// Texts with the transformer's vector for each (its `dims` floats at `i * dims`).
#[derive(Debug, Default, Clone)]
pub struct Texts {
    /// Each text's token ids (the static model's tokenisation: no special tokens).
    pub ids: Vec<Vec<u32>>,
    /// The transformer's vectors, one after another.
    pub targets: Vec<f32>,
}

impl Texts {
    /// Adds one text.
    pub fn push(&mut self, ids: Vec<u32>, target: &[f32]) {
        self.ids.push(ids);
        self.targets.extend_from_slice(target);
    }

    /// How many texts.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// What a fit did: the mean cosine between the model's and the transformer's vectors on the
/// held-out texts, before and after.
#[derive(Debug, Clone, Copy)]
pub struct Fit {
    /// Held-out mean cosine before tuning.
    pub before: f64,
    /// Held-out mean cosine after.
    pub after: f64,
}

/// Texts fitted together (one Adam step).
const BATCH: usize = 64;
/// Adam's step size: the distilled rows' entries are about 0.2 in size.
const STEP: f32 = 1e-3;

/// Short runs of 3 to 12 words from each section's body (its first line, the title and heading
/// path, left out), `per` of them a section: texts shaped like search queries, which the
/// transformer reads very differently from a sum of their words. Links' targets and web
/// addresses are skipped. Deterministic.
pub fn word_runs(sections: &[String], per: usize) -> Vec<String> {
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    let mut out = Vec::new();
    for text in sections {
        let words: Vec<&str> = text
            .lines()
            .skip(1)
            .flat_map(str::split_whitespace)
            .filter(|w| {
                w.chars().any(char::is_alphabetic) && !w.contains("](") && !w.contains("://")
            })
            .collect();
        if words.len() < 4 {
            continue;
        }
        for _ in 0..per {
            let len = (3 + rng.below(10)).min(words.len());
            let start = rng.below(words.len() - len + 1);
            out.push(words[start..start + len].join(" "));
        }
    }
    out
}

/// Fits `table` (rows of `dims`) to `train` for `epochs` passes; `held` measures the fit
/// before and after. `progress` hears (epochs done, epochs).
pub fn fit(
    table: &mut [f32],
    dims: usize,
    train: &Texts,
    held: &Texts,
    epochs: usize,
    progress: &dyn Fn(usize, usize),
) -> Fit {
    let before = mean_cosine(table, dims, held);
    let rows = table.len() / dims;
    let mut adam = Adam {
        first: vec![0.0; table.len()],
        second: vec![0.0; table.len()],
        steps: vec![0; rows],
    };
    let mut grad = vec![0f32; table.len()];
    let mut touched: Vec<usize> = Vec::new();
    let mut seen = vec![false; rows];
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    for epoch in 0..epochs {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for batch in order.chunks(BATCH) {
            let table_now: &[f32] = table;
            // Each text's gradient with respect to the sum of its rows, in parallel.
            let grads: Vec<Option<Vec<f32>>> = batch
                .par_iter()
                .map(|&i| {
                    let target = &train.targets[i * dims..(i + 1) * dims];
                    text_gradient(table_now, dims, &train.ids[i], target)
                })
                .collect();
            let scale = 1.0 / batch.len() as f32;
            for (&i, g) in batch.iter().zip(&grads) {
                let Some(g) = g else { continue };
                for &id in &train.ids[i] {
                    let r = id as usize;
                    if r >= rows {
                        continue;
                    }
                    if !seen[r] {
                        seen[r] = true;
                        touched.push(r);
                    }
                    for (a, x) in grad[r * dims..(r + 1) * dims].iter_mut().zip(g) {
                        *a += x * scale;
                    }
                }
            }
            for &r in &touched {
                adam.step(table, &mut grad, r, dims);
                seen[r] = false;
            }
            touched.clear();
        }
        progress(epoch + 1, epochs);
    }
    Fit {
        before,
        after: mean_cosine(table, dims, held),
    }
}

/// The gradient of `1 - cos(sum of the rows of ids, target)` with respect to that sum; `None`
/// when the text has no row or the sum is zero.
fn text_gradient(table: &[f32], dims: usize, ids: &[u32], target: &[f32]) -> Option<Vec<f32>> {
    let sum = row_sum(table, dims, ids)?;
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let (ns, nt) = (norm(&sum), norm(target));
    if ns == 0.0 || nt == 0.0 || !ns.is_finite() {
        return None;
    }
    let cos = sum.iter().zip(target).map(|(a, b)| a * b).sum::<f32>() / (ns * nt);
    Some(
        sum.iter()
            .zip(target)
            .map(|(s, t)| -(t / nt - cos * s / ns) / ns)
            .collect(),
    )
}

/// The sum of the rows of `ids` (ids beyond the table skipped); `None` when none is in it.
fn row_sum(table: &[f32], dims: usize, ids: &[u32]) -> Option<Vec<f32>> {
    let mut sum = vec![0f32; dims];
    let mut any = false;
    for &id in ids {
        let Some(row) = table.get(id as usize * dims..(id as usize + 1) * dims) else {
            continue;
        };
        any = true;
        for (a, x) in sum.iter_mut().zip(row) {
            *a += x;
        }
    }
    any.then_some(sum)
}

/// The mean cosine between each text's row sum and its target (0 for a text with no row).
pub fn mean_cosine(table: &[f32], dims: usize, texts: &Texts) -> f64 {
    if texts.is_empty() {
        return 0.0;
    }
    let total: f64 = (0..texts.len())
        .into_par_iter()
        .map(|i| {
            let target = &texts.targets[i * dims..(i + 1) * dims];
            let Some(sum) = row_sum(table, dims, &texts.ids[i]) else {
                return 0.0;
            };
            let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let d = norm(&sum) * norm(target);
            if d == 0.0 || !d.is_finite() {
                return 0.0;
            }
            f64::from(sum.iter().zip(target).map(|(a, b)| a * b).sum::<f32>() / d)
        })
        .collect::<Vec<f64>>()
        .iter()
        .sum();
    total / texts.len() as f64
}

/// Adam's running moments, per entry, and its step count, per row (rows step only when a
/// batch uses them).
struct Adam {
    first: Vec<f32>,
    second: Vec<f32>,
    steps: Vec<u32>,
}

impl Adam {
    /// Moves row `r` of `table` down its gradient (in `grad`, which is zeroed).
    fn step(&mut self, table: &mut [f32], grad: &mut [f32], r: usize, dims: usize) {
        const B1: f32 = 0.9;
        const B2: f32 = 0.999;
        self.steps[r] = self.steps[r].saturating_add(1);
        let t = i32::try_from(self.steps[r]).unwrap_or(i32::MAX);
        let (c1, c2) = (1.0 - B1.powi(t), 1.0 - B2.powi(t));
        for j in r * dims..(r + 1) * dims {
            let g = std::mem::take(&mut grad[j]);
            self.first[j] = B1 * self.first[j] + (1.0 - B1) * g;
            self.second[j] = B2 * self.second[j] + (1.0 - B2) * g * g;
            table[j] -= STEP * (self.first[j] / c1) / ((self.second[j] / c2).sqrt() + 1e-8);
        }
    }
}

/// A small deterministic generator (the shuffle and the word runs).
struct Xorshift(u64);

impl Xorshift {
    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A corpus where the words' lone vectors are all alike but each text has its own meaning
    /// (a target the row sums can reach): tuning must bring the held-out texts closer.
    fn corpus() -> (Vec<f32>, Texts, Texts) {
        let dims = 4;
        let tokens = 12;
        // Every row starts the same: distillation knew nothing.
        let table = vec![0.1f32; tokens * dims];
        // Each token's "meaning": one axis, with a sign.
        let meaning = |id: u32| {
            let mut v = vec![0f32; dims];
            v[id as usize % dims] = if id.is_multiple_of(3) { -1.0 } else { 1.0 };
            v
        };
        let (mut train, mut held) = (Texts::default(), Texts::default());
        let mut rng = Xorshift(7);
        for i in 0..2000usize {
            let ids: Vec<u32> = (0..1 + rng.below(4))
                .map(|_| rng.below(tokens) as u32)
                .collect();
            let mut target = vec![0f32; dims];
            for &id in &ids {
                for (t, m) in target.iter_mut().zip(meaning(id)) {
                    *t += m;
                }
            }
            if target.iter().all(|x| *x == 0.0) {
                continue;
            }
            if i.is_multiple_of(5) {
                held.push(ids, &target);
            } else {
                train.push(ids, &target);
            }
        }
        (table, train, held)
    }

    #[test]
    fn tuning_brings_held_out_texts_closer_to_the_teacher() {
        let (mut table, train, held) = corpus();
        let fit = fit(&mut table, 4, &train, &held, 40, &|_, _| {});
        assert!(fit.before < 0.6, "{fit:?}");
        assert!(fit.after > 0.9, "{fit:?}");
        assert!((fit.after - mean_cosine(&table, 4, &held)).abs() < 1e-9);
    }

    #[test]
    fn tuning_is_deterministic_and_leaves_unused_rows_alone() {
        let (table, train, held) = corpus();
        let mut wider = table.clone();
        // Two rows no text uses.
        wider.extend([0.25f32; 8]);
        let mut a = wider.clone();
        let mut b = wider.clone();
        fit(&mut a, 4, &train, &held, 3, &|_, _| {});
        fit(&mut b, 4, &train, &held, 3, &|_, _| {});
        assert_eq!(a, b);
        assert_eq!(a[table.len()..], wider[table.len()..]);
        assert_ne!(a[..table.len()], wider[..table.len()]);
    }

    #[test]
    fn word_runs_are_short_runs_of_a_sections_body() {
        let sections = vec![
            "Title\none two three four five six seven eight nine ten eleven twelve thirteen \
             [link](https://example.com) https://example.com/x"
                .to_owned(),
            "Too short\nthree words only".to_owned(),
        ];
        let runs = word_runs(&sections, 20);
        assert_eq!(runs.len(), 20);
        assert_eq!(runs, word_runs(&sections, 20));
        for r in &runs {
            let n = r.split(' ').count();
            assert!((3..=12).contains(&n), "{r}");
            assert!(!r.contains("Title") && !r.contains("://"), "{r}");
            assert!(sections[0].contains(r.as_str()), "{r}");
        }
        assert!(runs.iter().any(|r| r.split(' ').count() > 3));
    }
}
