//! `capvault model import`: a static model distilled from a sentence-transformers folder (a BERT
//! encoder, `model.safetensors` + `tokenizer.json` + `config.json`), by model2vec's method:
//! run the transformer on every token of its vocabulary alone (`[CLS] token [SEP]`, mean
//! pooled), centre the vectors and keep their principal components, then weight each token by
//! its rank (tokenizers list frequent tokens first: a frequent token says less about a text).
//! A raw copy of the transformer's input embedding table would skip the transformer and rank
//! much worse.
//!
//! The transformer runs in-process on the CPU (candle); the source files' bytes are read
//! through a folder handle ([`crate::vault::host`]), and the model is written the same way.

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use std::collections::HashMap;
use std::ops::ControlFlow;

use super::model::{self, ModelError, StaticModel};
use super::{chunk, tune};
use crate::vault::host::Host;
use crate::vault::{Limits, Vault, VaultPath, is_note_name};

/// Dimensions the imported model keeps by default (potion-base-8M's).
pub const DEFAULT_DIMENSIONS: usize = 256;
/// Vocabulary tokens run through the transformer at once.
const BATCH: usize = 256;
/// Tokens (padding included) in one call of the transformer on texts: 4 texts of 256 tokens,
/// or 64 of 16. About a tenth faster than calls of 256 or 4,096 tokens on obsidian-hub's
/// sections and runs of words (docs/performance.md).
const BATCH_TOKENS: usize = 1024;
/// model2vec's smoothing constant for the rank weights.
const SIF: f64 = 1e-4;

/// What an import made.
#[derive(Debug, Clone)]
pub struct Imported {
    /// Tokens in the vocabulary.
    pub tokens: usize,
    /// Dimensions kept.
    pub dimensions: usize,
    /// Share of the variance the kept dimensions hold.
    pub variance_kept: f64,
    /// sha256 of the source weights.
    pub source_sha256: String,
    /// Seconds the import took (the transformer, and tuning).
    pub seconds: f64,
    /// What tuning on a corpus did, when there was one.
    pub tuned: Option<Tuned>,
}

/// Why an import (or the transformer) failed: what failed, in the words the user sees.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The source model's files could not be read.
    #[error(transparent)]
    Load(#[from] super::LoadError),
    /// The corpus folder does not open, cannot be walked, or has no notes.
    #[error("model import: corpus {path}: {source}")]
    Corpus {
        path: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file of the model is not what a static model needs.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The tokenizer refused a setting or a text.
    #[error("{0}")]
    Tokenizer(tokenizers::Error),
    /// The tokenizer library panicked on a text.
    #[error("the tokenizer failed on a text")]
    TokenizerPanicked,
    /// JSON that does not parse or cannot be written.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// `config.json` is not a BERT config.
    #[error("config.json is not a BERT config: {0}")]
    NotBert(serde_json::Error),
    /// A size in `config.json` out of bounds.
    #[error("config.json: {name} is {value}; it must be 1 to {max}")]
    ConfigSize {
        name: &'static str,
        value: usize,
        max: usize,
    },
    /// The attention heads do not divide the width.
    #[error("config.json: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")]
    HeadsDoNotDivide { hidden: usize, heads: usize },
    /// Too few positions for `[CLS] token [SEP]`.
    #[error("config.json: max_position_embeddings must be at least 3")]
    FewPositions,
    /// A layer norm epsilon that is negative or not finite.
    #[error("config.json: layer_norm_eps must be a finite number, not negative")]
    LayerNormEps,
    /// The tokenizer has a token past the model's table.
    #[error("tokenizer.json has token id {largest}, beyond the model's {vocab} tokens")]
    TokenBeyondModel { largest: u32, vocab: usize },
    /// The weights do not load as the config's BERT model.
    #[error("model.safetensors: {0}")]
    Weights(candle_core::Error),
    /// The model library panicked on the weights.
    #[error("model.safetensors: the model library failed on it")]
    WeightsPanicked,
    /// Running the transformer failed.
    #[error("the transformer failed: {0}")]
    Transformer(candle_core::Error),
    /// The model library panicked while running the transformer.
    #[error("the transformer failed (the model library panicked)")]
    TransformerPanicked,
    /// The tokenizer has no tokens.
    #[error("the tokenizer has no tokens")]
    NoTokens,
    /// The distilled table's components are not numbers.
    #[error("the principal components are not finite numbers")]
    NotFinite,
    /// Corpus words need BERT's WordPiece tokenizer.
    #[error("corpus words need a WordPiece tokenizer (BERT's)")]
    NotWordPiece,
    /// `tokenizer.json` has no WordPiece vocabulary.
    #[error("tokenizer.json has no WordPiece vocabulary")]
    NoWordPieceVocabulary,
    /// `tokenizer.json` has more tokens than the model.
    #[error("tokenizer.json has more tokens than the model")]
    MoreTokensThanModel,
    /// A corpus word that is a token already.
    #[error("the corpus word {0:?} is already a token")]
    WordIsToken(String),
    /// The tokenizer did not add the corpus's words.
    #[error("the tokenizer did not take the corpus's words as new tokens")]
    WordsNotTaken,
    /// The static model made does not load.
    #[error("the imported model does not load: {0}")]
    DoesNotLoad(ModelError),
    /// A file of the static model could not be written.
    #[error("model import: {0}")]
    Write(crate::vault::host::HostError),
}

/// What an import is doing, for progress reports: (done, in all) of each stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The transformer on every token of the vocabulary.
    Tokens(usize, usize),
    /// The transformer on the corpus's texts (with `--corpus`).
    Texts(usize, usize),
    /// Passes of tuning over them.
    Epochs(usize, usize),
}

/// Sections a corpus contributes at most (taken evenly across its notes).
pub const MAX_CORPUS_SECTIONS: usize = 20_000;
/// Runs of words taken from each section as query-like texts ([`super::tune::word_runs`]).
const RUNS_PER_SECTION: usize = 8;
/// Runs of words in all at most (taken evenly), which bounds the import's time and memory.
const MAX_RUNS: usize = 64_000;
/// Passes over the corpus.
const EPOCHS: usize = 30;
/// Words of the corpus that the tokenizer splits into pieces, added to a tuned model's
/// vocabulary whole: at most this many, the most used first.
const MAX_ADDED_WORDS: usize = 10_000;
/// Uses in the corpus a word needs to be added (and letters, at least and at most).
const MIN_WORD_USES: usize = 3;
const WORD_LETTERS: std::ops::RangeInclusive<usize> = 4..=30;
/// One text in this many is held out to measure the fit.
const HELD_OUT_EVERY: usize = 20;
/// Tokens of a section the static model is tuned on: the transformer reads no more (its limit,
/// less `[CLS]` and `[SEP]`). Cutting at 128 instead saved a quarter of the transformer's time
/// on sections but lost a labelled query (docs/performance.md).
const TUNED_TOKENS: usize = MAX_SEQUENCE - 2;

/// Distils the sentence-transformers model in `src` into a static model written to `out`
/// (created if missing): `config.json`, `tokenizer.json`, `model.safetensors`. With `corpus`
/// (a vault folder), the distilled rows are then tuned on its notes ([`super::tune`]).
pub fn import(
    host: &Host,
    src: &Path,
    out: &Path,
    dimensions: usize,
    corpus: Option<&Path>,
    progress: &dyn Fn(Progress),
) -> Result<Imported, ImportError> {
    let [config_bytes, tokenizer_bytes, weights] =
        super::read_model_files(host, src, "model import")?;
    // Read the corpus first: a bad folder fails before minutes of work.
    let sections = corpus
        .map(|c| corpus_sections(c, MAX_CORPUS_SECTIONS))
        .transpose()?;
    let source_sha256 = base16ct::lower::encode_string(&Sha256::digest(&weights));
    let transformer = Transformer::from_bytes(&config_bytes, &tokenizer_bytes, weights)?;
    let started = Instant::now();
    let table = transformer.token_vectors(&|d, n| progress(Progress::Tokens(d, n)))?;
    let hidden = transformer.config.hidden_size;
    let tokens = table.len() / hidden;
    let dims = dimensions.clamp(1, hidden);
    let pca = Pca::of(&table, hidden, dims)?;
    let mut rows = pca.centred(&table);
    // With a corpus, its words that the tokenizer would split into pieces join the vocabulary
    // whole (their rows after the tokens', weighted as the rarest): a bag of pieces loses what
    // "diacritics" or "spreadsheet" mean.
    let mut words = Vec::new();
    let mut with_words = None;
    let mut tokenizer_bytes = tokenizer_bytes;
    if let Some(sections) = &sections {
        words = corpus_words(&transformer.tokenizer, sections)?;
        rows.extend(pca.centred(&transformer.word_vectors(&words)?));
        if !words.is_empty() {
            tokenizer_bytes = with_whole_words(&tokenizer_bytes, &words, tokens)?;
            let mut t = model::parse_tokenizer(&tokenizer_bytes)?;
            // As the server reads it: whole texts, no padding.
            t.with_padding(None);
            t.with_truncation(None).map_err(ImportError::Tokenizer)?;
            if t.get_vocab_size(true) != tokens + words.len() {
                return Err(ImportError::WordsNotTaken);
            }
            with_words = Some(t);
        }
    }
    weight_by_rank(&mut rows, hidden);
    let tuned = match &sections {
        Some(sections) => Some(tune_on(
            &transformer,
            with_words.as_ref().unwrap_or(&transformer.tokenizer),
            &mut rows,
            sections,
            words.len(),
            progress,
        )?),
        None => None,
    };
    let reduced = pca.project(&rows);
    let seconds = started.elapsed().as_secs_f64();
    let name = src.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    let mut config_out = serde_json::json!({
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "hidden_dim": dims,
        "normalize": true,
        "name": format!("{name} (static, {dims} dimensions)"),
        "revision": format!("sha256:{}", &source_sha256[..16]),
        "source_sha256": source_sha256,
        "made_by": "capvault model import",
    });
    if let Some(t) = &tuned {
        config_out["name"] = format!("{name} (static, {dims} dimensions, tuned on a vault)").into();
        config_out["tuned"] = serde_json::json!({
            "sections": t.sections,
            "texts": t.texts,
            "words_added": t.words,
            "held_out_cosine_before": t.fit.before,
            "held_out_cosine_after": t.fit.after,
        });
    }
    let weights_out = model::safetensors_bytes(&reduced, dims)?;
    let config_out = serde_json::to_vec_pretty(&config_out)?;
    // What was written must load: the same checks as at startup.
    StaticModel::from_bytes(&config_out, &tokenizer_bytes, &weights_out, name)
        .map_err(ImportError::DoesNotLoad)?;
    for (file, bytes) in [
        ("tokenizer.json", &tokenizer_bytes),
        ("model.safetensors", &weights_out),
        ("config.json", &config_out),
    ] {
        // A tuned model carries traces of the corpus's words: as private as the index cache.
        host.file(&out.join(file))
            .map(|f| if tuned.is_some() { f.private() } else { f })
            .and_then(|mut f| f.replace(bytes, None).map(drop))
            .map_err(ImportError::Write)?;
    }
    Ok(Imported {
        tokens: tokens + words.len(),
        dimensions: dims,
        variance_kept: pca.variance_kept,
        source_sha256,
        seconds,
        tuned,
    })
}

/// What tuning on a corpus did.
#[derive(Debug, Clone, Copy)]
pub struct Tuned {
    /// Sections of the corpus used.
    pub sections: usize,
    /// Texts fitted: the sections and runs of words from them.
    pub texts: usize,
    /// Words of the corpus added to the vocabulary whole.
    pub words: usize,
    /// The fit on held-out texts.
    pub fit: tune::Fit,
}

/// The sections of the notes of the vault at `root`, cut and cleaned as the server cuts them
/// (the vault's boilerplate lines left out), at most `max`, taken evenly. Read through the
/// capability layer, like any vault.
fn corpus_sections(root: &Path, max: usize) -> Result<Vec<String>, ImportError> {
    let fail = |e: Box<dyn std::error::Error + Send + Sync>| ImportError::Corpus {
        path: root.display().to_string(),
        source: e,
    };
    let vault = Vault::open(root, Limits::default()).map_err(|e| fail(e.into()))?;
    let mut notes: Vec<(VaultPath, String)> = Vec::new();
    vault
        .walk(&VaultPath::root(), true, &is_note_name, &mut |entry| {
            // A note that cannot be read is left out, as the server leaves it out.
            if let Ok(data) = entry.read(&vault) {
                notes.push((
                    entry.path,
                    String::from_utf8_lossy(&data.bytes).into_owned(),
                ));
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| fail(e.into()))?;
    if notes.is_empty() {
        return Err(fail("it has no notes".into()));
    }
    notes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut counts: HashMap<u64, u32> = HashMap::new();
    for (path, text) in &notes {
        for k in chunk::line_keys(path.stem(), text) {
            *counts.entry(k).or_default() += 1;
        }
    }
    let boilerplate = chunk::boilerplate(counts, notes.len());
    let sections = |(path, text): &(VaultPath, String)| {
        chunk::chunks_without(path.stem(), text, &boilerplate).into_iter()
    };
    // Counted first, so that only the sections kept are ever held (a large vault's sections
    // would take as much memory again as its text).
    let total: usize = notes.iter().map(|n| sections(n).len()).sum();
    let every = total.div_ceil(max.max(1)).max(1);
    Ok(notes
        .iter()
        .flat_map(sections)
        .step_by(every)
        .map(|c| c.text)
        .collect())
}

/// Tunes `rows` (the distilled table, centred and weighted, `hidden` wide, then the rows of
/// the `words` added to `tokenizer`) on `sections` and runs of words from them, as `tokenizer`
/// cuts them, with the transformer as the teacher.
fn tune_on(
    transformer: &Transformer,
    tokenizer: &Tokenizer,
    rows: &mut [f32],
    sections: &[String],
    words: usize,
    progress: &dyn Fn(Progress),
) -> Result<Tuned, ImportError> {
    let hidden = transformer.config.hidden_size;
    let mut texts: Vec<&str> = sections.iter().map(String::as_str).collect();
    let runs = tune::word_runs(sections, RUNS_PER_SECTION);
    let every = runs.len().div_ceil(MAX_RUNS).max(1);
    texts.extend(runs.iter().step_by(every).map(String::as_str));
    let (mut train, mut held) = (tune::Texts::default(), tune::Texts::default());
    let mut done = 0;
    for batch in texts.chunks(256) {
        let vectors = transformer.embed(batch)?;
        for (text, v) in batch.iter().zip(vectors) {
            let mut ids = static_ids(tokenizer, text)?;
            ids.truncate(TUNED_TOKENS);
            if done % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 {
                held.push(ids, &v);
            } else {
                train.push(ids, &v);
            }
            done += 1;
        }
        progress(Progress::Texts(done, texts.len()));
    }
    debug_assert_eq!(train.targets.len() % hidden, 0);
    let fit = tune::fit(rows, hidden, &train, &held, EPOCHS, &|d, n| {
        progress(Progress::Epochs(d, n));
    });
    Ok(Tuned {
        sections: sections.len(),
        texts: texts.len(),
        words,
        fit,
    })
}

/// A sentence-transformers BERT encoder, run in-process on the CPU: what `import` distils, and
/// the reference its static models are measured against (`tests/semantic_quality.rs`). Far too
/// slow to embed a vault of any size here (tens of sections a second on two cores).
pub struct Transformer {
    bert: BertModel,
    tokenizer: Tokenizer,
    config: Config,
    info: model::ModelInfo,
    fingerprint: [u8; 32],
}

impl std::fmt::Debug for Transformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transformer")
            .field("hidden_size", &self.config.hidden_size)
            .finish_non_exhaustive()
    }
}

/// Longest text the transformer reads, in tokens (sentence-transformers' limit for these
/// models).
const MAX_SEQUENCE: usize = 256;

impl Transformer {
    /// Loads the sentence-transformers folder `dir` (`config.json`, `tokenizer.json`,
    /// `model.safetensors`), read through a folder handle.
    pub fn load(host: &Host, dir: &Path) -> Result<Transformer, ImportError> {
        let [config, tokenizer, weights] = super::read_model_files(host, dir, "transformer")?;
        Transformer::from_bytes(&config, &tokenizer, weights)
    }

    /// A transformer from the bytes of its three files (named `model` until [`Self::name`]).
    /// The config's sizes are checked before candle builds anything from them, and a panic in
    /// candle's loader is an error, never a crash at startup (`fuzz/fuzz_targets/transformer_files.rs`).
    pub fn from_bytes(
        config_bytes: &[u8],
        tokenizer: &[u8],
        weights: Vec<u8>,
    ) -> Result<Self, ImportError> {
        let fingerprint = model::fingerprint(&[config_bytes, tokenizer, &weights]);
        let config: Config = serde_json::from_slice(config_bytes).map_err(ImportError::NotBert)?;
        check_config(&config)?;
        let mut tokenizer = model::parse_tokenizer(tokenizer)?;
        let largest = tokenizer.get_vocab(true).into_values().max().unwrap_or(0);
        if largest as usize >= config.vocab_size {
            return Err(ImportError::TokenBeyondModel {
                largest,
                vocab: config.vocab_size,
            });
        }
        // Padding (to 128, in all-MiniLM-L6-v2's file) would be pooled as text: `embed` pads
        // each batch itself and masks the padding; it also cuts texts itself.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(ImportError::Tokenizer)?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(ImportError::Weights)?;
        let bert = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            BertModel::load(vb, &config)
        }))
        .map_err(|_| ImportError::WeightsPanicked)?
        .map_err(ImportError::Weights)?;
        let info = model::ModelInfo {
            name: "model".to_owned(),
            revision: None,
            dimensions: config.hidden_size,
            vocabulary: config.vocab_size,
        };
        Ok(Transformer {
            bert,
            tokenizer,
            config,
            info,
            fingerprint,
        })
    }

    /// Names the model (and its revision, when known).
    pub(crate) fn name(&mut self, name: String, revision: Option<&str>) {
        self.info.name = name;
        self.info.revision = revision.map(str::to_owned);
    }

    /// What the model is.
    pub fn info(&self) -> &model::ModelInfo {
        &self.info
    }

    /// sha256 of the files it was loaded from.
    pub fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }

    /// The mean of the encoder's outputs over each row's real tokens (`mask` 1), normalised:
    /// sentence-transformers' pooling for these models.
    fn pooled(
        &self,
        ids: Vec<u32>,
        mask: Vec<u32>,
        rows: usize,
    ) -> Result<Vec<Vec<f32>>, ImportError> {
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let width = ids.len() / rows;
            let input = Tensor::from_vec(ids, (rows, width), &Device::Cpu)?;
            let mask = Tensor::from_vec(mask, (rows, width), &Device::Cpu)?;
            let types = input.zeros_like()?;
            let out = self.bert.forward(&input, &types, Some(&mask))?;
            let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let sum = out.broadcast_mul(&m)?.sum(1)?;
            let count = m.sum(1)?;
            sum.broadcast_div(&count)?.to_vec2::<f32>()
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
            .map_err(|_| ImportError::TransformerPanicked)?
            .map_err(ImportError::Transformer)
    }

    /// Each sequence's mean-pooled output, the sequences run at once, padded to the longest
    /// (the padding masked out of attention and of the mean).
    fn pooled_padded<'a>(
        &self,
        seqs: impl Iterator<Item = &'a [u32]> + Clone,
    ) -> Result<Vec<Vec<f32>>, ImportError> {
        let width = seqs.clone().map(<[u32]>::len).max().unwrap_or(1);
        let (mut ids, mut mask, mut rows) = (Vec::new(), Vec::new(), 0);
        for s in seqs {
            ids.extend(s);
            mask.extend(std::iter::repeat_n(1, s.len()));
            ids.extend(std::iter::repeat_n(0, width - s.len()));
            mask.extend(std::iter::repeat_n(0, width - s.len()));
            rows += 1;
        }
        self.pooled(ids, mask, rows)
    }

    /// Longest token sequence run: [`MAX_SEQUENCE`], or the model's positions if fewer.
    fn max_sequence(&self) -> usize {
        MAX_SEQUENCE.min(self.config.max_position_embeddings)
    }

    /// The vectors of `words` as the vocabulary's tokens get theirs: `[CLS] pieces [SEP]`,
    /// mean-pooled. Rows in order.
    fn word_vectors(&self, words: &[String]) -> Result<Vec<f32>, ImportError> {
        let special = |t: &str| self.tokenizer.token_to_id(t);
        let (cls, sep) = (special("[CLS]"), special("[SEP]"));
        let max = self.max_sequence();
        let mut table = Vec::with_capacity(words.len() * self.config.hidden_size);
        for chunk in words.chunks(BATCH) {
            let seqs: Vec<Vec<u32>> = chunk
                .iter()
                .map(|w| {
                    let mut ids: Vec<u32> = cls.into_iter().collect();
                    ids.extend(static_ids(&self.tokenizer, w)?.into_iter().take(max - 2));
                    ids.extend(sep);
                    Ok(ids)
                })
                .collect::<Result<_, ImportError>>()?;
            for r in self.pooled_padded(seqs.iter().map(Vec::as_slice))? {
                table.extend(r);
            }
        }
        Ok(table)
    }

    /// The vectors of `texts` (each cut at [`MAX_SEQUENCE`] tokens), normalised; run in
    /// batches of texts of similar length.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ImportError> {
        let max = self.max_sequence();
        let mut encoded = Vec::with_capacity(texts.len());
        for t in texts {
            // The tokenizer library panics on some inputs: a text it fails on is an error,
            // never a dead thread.
            let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.tokenizer.encode(*t, true)
            }))
            .map_err(|_| ImportError::TokenizerPanicked)?
            .map_err(ImportError::Tokenizer)?;
            let mut ids = e.get_ids().to_vec();
            if ids.len() > max {
                let last = ids[ids.len() - 1];
                ids.truncate(max - 1);
                ids.push(last);
            }
            encoded.push(ids);
        }
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encoded[i].len());
        let dims = self.config.hidden_size;
        // A text of no token (the tokenizer adds none) stays a zero vector: it matches nothing.
        let mut out = vec![vec![0.0; dims]; texts.len()];
        order.retain(|&i| !encoded[i].is_empty());
        // Batches of about BATCH_TOKENS tokens, texts of like length together: short texts
        // (queries, runs of words) go many at a time, where a call per 16 was mostly overhead.
        let mut batches: Vec<&[usize]> = Vec::new();
        let mut rest = &order[..];
        while !rest.is_empty() {
            let mut n = 1;
            while n < rest.len() && (n + 1) * encoded[rest[n]].len() <= BATCH_TOKENS {
                n += 1;
            }
            let (batch, tail) = rest.split_at(n);
            batches.push(batch);
            rest = tail;
        }
        for batch in batches {
            let pooled = self.pooled_padded(batch.iter().map(|&i| encoded[i].as_slice()))?;
            for (&i, mut v) in batch.iter().zip(pooled) {
                // A model whose numbers overflow gives a vector that cannot be normalised: it
                // matches nothing, rather than spoil every cosine with NaN.
                if v.len() == dims && model::normalise(&mut v) {
                    out[i] = v;
                }
            }
        }
        Ok(out)
    }

    /// Every token's vector: `[CLS] token [SEP]`, mean-pooled over the three positions. Rows
    /// in token-id order.
    fn token_vectors(&self, progress: &dyn Fn(usize, usize)) -> Result<Vec<f32>, ImportError> {
        let vocab = self
            .tokenizer
            .get_vocab_size(true)
            .min(self.config.vocab_size);
        if vocab == 0 {
            return Err(ImportError::NoTokens);
        }
        let special = |t: &str| self.tokenizer.token_to_id(t);
        let (cls, sep) = (special("[CLS]"), special("[SEP]"));
        let width = 1 + usize::from(cls.is_some()) + usize::from(sep.is_some());
        let mut table = Vec::with_capacity(vocab * self.config.hidden_size);
        let mut start = 0;
        while start < vocab {
            let end = (start + BATCH).min(vocab);
            let mut ids: Vec<u32> = Vec::with_capacity((end - start) * width);
            for id in start..end {
                ids.extend(cls);
                ids.push(id as u32);
                ids.extend(sep);
            }
            let mask = vec![1; ids.len()];
            for r in self.pooled(ids, mask, end - start)? {
                table.extend(r);
            }
            start = end;
            progress(start, vocab);
        }
        Ok(table)
    }
}

/// The token ids a static model made with `tokenizer` sums for `text` (no special tokens).
fn static_ids(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>, ImportError> {
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tokenizer.encode_fast(text, false)
    }))
    .map_err(|_| ImportError::TokenizerPanicked)?
    .map_err(ImportError::Tokenizer)?;
    let mut ids = e.get_ids().to_vec();
    ids.truncate(model::MAX_TOKENS);
    Ok(ids)
}

/// The corpus's words (ASCII letters, lower-cased) that `tokenizer` splits into pieces, used at
/// least [`MIN_WORD_USES`] times: the most used first (ties alphabetical), at most
/// [`MAX_ADDED_WORDS`].
fn corpus_words(tokenizer: &Tokenizer, sections: &[String]) -> Result<Vec<String>, ImportError> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for s in sections {
        for w in s.split(|c: char| !c.is_ascii_alphabetic()) {
            if WORD_LETTERS.contains(&w.len()) {
                *counts.entry(w.to_ascii_lowercase()).or_default() += 1;
            }
        }
    }
    let mut words: Vec<(usize, String)> = counts
        .into_iter()
        .filter(|(_, n)| *n >= MIN_WORD_USES)
        .map(|(w, n)| (n, w))
        .collect();
    words.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut out = Vec::new();
    for (_, w) in words {
        if out.len() == MAX_ADDED_WORDS {
            break;
        }
        if static_ids(tokenizer, &w)?.len() > 1 {
            out.push(w);
        }
    }
    Ok(out)
}

/// `tokenizer_json` with `words` in its WordPiece vocabulary, as ids `first`, `first + 1`...
/// WordPiece takes the longest entry a word starts with, so an added word is read whole (and
/// "sourdoughs" as `sourdough`, `##s`) at no cost to tokenising: the same lookup as before.
/// (Added tokens would do the same through a second pass over every text, which made embedding
/// a fifth to a half slower: docs/performance.md.)
fn with_whole_words(
    tokenizer_json: &[u8],
    words: &[String],
    first: usize,
) -> Result<Vec<u8>, ImportError> {
    let mut json: serde_json::Value = serde_json::from_slice(tokenizer_json)?;
    let added = json["added_tokens"].as_array().into_iter().flatten();
    let added: Vec<u64> = added.filter_map(|t| t["id"].as_u64()).collect();
    let model = &mut json["model"];
    if model["type"] != "WordPiece" {
        return Err(ImportError::NotWordPiece);
    }
    let Some(vocab) = model["vocab"].as_object_mut() else {
        return Err(ImportError::NoWordPieceVocabulary);
    };
    // No id from `first` on may be taken, in the vocabulary or by an added token.
    let ids = vocab
        .values()
        .filter_map(serde_json::Value::as_u64)
        .chain(added);
    if ids.into_iter().any(|id| id >= first as u64) {
        return Err(ImportError::MoreTokensThanModel);
    }
    for (i, w) in words.iter().enumerate() {
        if vocab.insert(w.clone(), (first + i).into()).is_some() {
            return Err(ImportError::WordIsToken(w.clone()));
        }
    }
    Ok(serde_json::to_vec(&json)?)
}

/// Sizes candle would build a BERT model from, checked first: none zero, attention heads
/// dividing the width, and each within what a sentence encoder needs (the weights must then
/// match them tensor by tensor, so memory stays bounded by the file's size).
fn check_config(c: &Config) -> Result<(), ImportError> {
    let sizes = [
        ("vocab_size", c.vocab_size, model::MAX_VOCABULARY),
        ("hidden_size", c.hidden_size, model::MAX_DIMENSIONS),
        ("num_hidden_layers", c.num_hidden_layers, 128),
        ("num_attention_heads", c.num_attention_heads, 256),
        (
            "intermediate_size",
            c.intermediate_size,
            16 * model::MAX_DIMENSIONS,
        ),
        ("max_position_embeddings", c.max_position_embeddings, 65_536),
        ("type_vocab_size", c.type_vocab_size, 1024),
    ];
    for (name, value, max) in sizes {
        if value == 0 || value > max {
            return Err(ImportError::ConfigSize { name, value, max });
        }
    }
    if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
        return Err(ImportError::HeadsDoNotDivide {
            hidden: c.hidden_size,
            heads: c.num_attention_heads,
        });
    }
    if c.max_position_embeddings < 3 {
        return Err(ImportError::FewPositions);
    }
    if !(c.layer_norm_eps.is_finite() && c.layer_norm_eps >= 0.0) {
        return Err(ImportError::LayerNormEps);
    }
    Ok(())
}

/// The principal components of a table's rows: their mean, the `dims` directions that hold
/// most of their variance, and the share of it those hold.
struct Pca {
    hidden: usize,
    mean: Vec<f32>,
    /// `hidden` x `dims`.
    basis: nalgebra::DMatrix<f64>,
    variance_kept: f64,
}

impl Pca {
    /// The components of the rows of `table` (`hidden` wide), keeping `dims` of them.
    fn of(table: &[f32], hidden: usize, dims: usize) -> Result<Pca, ImportError> {
        let rows = table.len() / hidden;
        let mut mean = vec![0f64; hidden];
        for r in table.chunks_exact(hidden) {
            for (m, x) in mean.iter_mut().zip(r) {
                *m += f64::from(*x);
            }
        }
        for m in &mut mean {
            *m /= rows as f64;
        }
        let centred: Vec<f64> = table
            .chunks_exact(hidden)
            .flat_map(|r| r.iter().zip(&mean).map(|(x, m)| f64::from(*x) - m))
            .collect();
        let x = nalgebra::DMatrix::from_row_slice(rows, hidden, &centred);
        let cov = (x.transpose() * &x) / rows as f64;
        let eig = nalgebra::SymmetricEigen::new(cov);
        let mut order: Vec<usize> = (0..hidden).collect();
        order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
        let total: f64 = eig.eigenvalues.iter().map(|v| v.max(0.0)).sum();
        let kept: f64 = order[..dims]
            .iter()
            .map(|&i| eig.eigenvalues[i].max(0.0))
            .sum();
        let basis =
            nalgebra::DMatrix::from_fn(hidden, dims, |r, c| eig.eigenvectors[(r, order[c])]);
        if basis.iter().any(|v| !v.is_finite()) {
            return Err(ImportError::NotFinite);
        }
        Ok(Pca {
            hidden,
            mean: mean.into_iter().map(|m| m as f32).collect(),
            basis,
            variance_kept: if total > 0.0 { kept / total } else { 0.0 },
        })
    }

    /// The rows of `table` less the mean.
    fn centred(&self, table: &[f32]) -> Vec<f32> {
        table
            .chunks_exact(self.hidden)
            .flat_map(|r| r.iter().zip(&self.mean).map(|(x, m)| x - m))
            .collect()
    }

    /// Rows (`hidden` wide, already centred) on the kept components: `dims` wide.
    fn project(&self, rows: &[f32]) -> Vec<f32> {
        let n = rows.len() / self.hidden;
        let x = nalgebra::DMatrix::from_row_iterator(
            n,
            self.hidden,
            rows.iter().map(|v| f64::from(*v)),
        );
        let projected = x * &self.basis;
        let dims = self.basis.ncols();
        let mut out = Vec::with_capacity(n * dims);
        for r in 0..n {
            for c in 0..dims {
                out.push(projected[(r, c)] as f32);
            }
        }
        out
    }
}

/// Scales each row by model2vec's rank weight: with `p` the Zipf probability of the row's rank,
/// `SIF / (SIF + p)` (frequent tokens, listed first, count less).
fn weight_by_rank(table: &mut [f32], dims: usize) {
    let rows = table.len() / dims;
    let harmonic: f64 = (1..=rows).map(|r| 1.0 / r as f64).sum();
    for (rank, row) in table.chunks_exact_mut(dims).enumerate() {
        let p = 1.0 / ((rank + 1) as f64 * harmonic);
        let w = (SIF / (SIF + p)) as f32;
        for x in row {
            *x *= w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_components_keep_the_main_direction_first() {
        // Points along (1, 1, 0) with a little noise on z: one component holds almost all.
        let mut table = Vec::new();
        for i in 0..50 {
            let t = i as f32 - 25.0;
            table.extend([t, t, if i % 2 == 0 { 0.1 } else { -0.1 }]);
        }
        let pca = Pca::of(&table, 3, 1).unwrap();
        let out = pca.project(&pca.centred(&table));
        assert_eq!(out.len(), 50);
        assert!(pca.variance_kept > 0.999, "{}", pca.variance_kept);
        // Centred (the mean t is -0.5), the projection keeps distances along the line:
        // |t + 0.5| * sqrt(2).
        assert!(
            (out[0].abs() - 24.5 * 2f32.sqrt()).abs() < 1e-3,
            "{}",
            out[0]
        );
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture
    fn a_corpus_gives_at_most_its_cap_of_sections_taken_across_the_vault() {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..30 {
            let folder = tmp.path().join(format!("F{}", i % 3));
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(
                folder.join(format!("N{i:02}.md")),
                format!("words of note {i}\n"),
            )
            .unwrap();
        }
        std::fs::create_dir(tmp.path().join(".obsidian")).unwrap();
        std::fs::write(tmp.path().join(".obsidian/Hidden.md"), "hidden words\n").unwrap();
        let all = corpus_sections(tmp.path(), 100).unwrap();
        assert_eq!(all.len(), 30);
        assert!(all.iter().all(|s| !s.contains("hidden")));
        let some = corpus_sections(tmp.path(), 7).unwrap();
        assert!(some.len() <= 7 && some.len() >= 5, "{}", some.len());
        // Taken across the vault, not its first notes.
        // (the notes of folder Fk are those numbered k modulo 3)
        let folder = |s: &String| {
            let n: usize = s[1..3].parse().unwrap();
            n % 3
        };
        assert!(some.iter().any(|s| folder(s) == 0) && some.iter().any(|s| folder(s) == 2));
        assert!(some.iter().all(|s| all.contains(s)));
    }

    /// The fuzz seed's tiny BERT (`fuzz/seeds/make_tiny_bert.py`): config, tokenizer, weights.
    #[allow(clippy::disallowed_methods)] // test fixture
    fn tiny_bert() -> (serde_json::Value, Vec<u8>, Vec<u8>) {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fuzz/seeds/transformer_files/tiny_bert"
        ))
        .unwrap();
        let c = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let t = u32::from_le_bytes([data[2], data[3], data[4], data[5]]) as usize;
        let rest = &data[6..];
        (
            serde_json::from_slice(&rest[..c]).unwrap(),
            rest[c..c + t].to_vec(),
            rest[c + t..].to_vec(),
        )
    }

    #[test]
    fn a_tiny_bert_loads_and_embeds_unit_vectors() {
        let (config, tokenizer, weights) = tiny_bert();
        let config = serde_json::to_vec(&config).unwrap();
        let t = Transformer::from_bytes(&config, &tokenizer, weights).unwrap();
        // 41 tokens, more than the model's 16 positions: cut to them, not an error.
        let long = "the quick brown fox ".repeat(10);
        let v = t.embed(&["the quick brown fox", "", "zzz", &long]).unwrap();
        assert_eq!(v.len(), 4);
        for x in &v {
            assert_eq!(x.len(), 4);
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        }
        assert_ne!(v[0], v[2]);
    }

    #[test]
    fn a_text_embeds_alike_alone_and_in_batches_of_other_lengths() {
        let (config, tokenizer, weights) = tiny_bert();
        let config = serde_json::to_vec(&config).unwrap();
        let t = Transformer::from_bytes(&config, &tokenizer, weights).unwrap();
        let words = ["the", "quick", "brown", "fox", "zzz"];
        // 300 texts of 1 to 14 words: several batches, each padded to its longest text.
        let texts: Vec<String> = (0..300)
            .map(|i| {
                (0..1 + i % 14)
                    .map(|j| words[(i + j) % words.len()])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let together = t.embed(&refs).unwrap();
        for (text, v) in refs.iter().zip(&together) {
            let alone = t.embed(&[text]).unwrap().remove(0);
            let gap = alone
                .iter()
                .zip(v)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(gap < 1e-4, "{text:?}: {gap}");
        }
    }

    #[test]
    fn added_words_are_read_whole_and_as_the_stem_of_longer_words() {
        let (_, json, _) = tiny_bert();
        let before = model::parse_tokenizer(&json).unwrap();
        let first = before.get_vocab_size(true);
        let ids = |t: &Tokenizer, text: &str| static_ids(t, text).unwrap();
        assert!(
            ids(&before, "notes").len() > 1,
            "the tiny vocabulary splits notes"
        );
        let bytes = with_whole_words(&json, &["notes".to_owned()], first).unwrap();
        let after = model::parse_tokenizer(&bytes).unwrap();
        assert_eq!(after.get_vocab_size(true), first + 1);
        // Whole, in any case, and as the longest stem of a longer word ("notes" + "##s").
        assert_eq!(ids(&after, "Notes"), [first as u32]);
        let s = after.token_to_id("##s").unwrap();
        assert_eq!(ids(&after, "notess"), [first as u32, s]);
        // Other words read as before.
        assert_eq!(ids(&after, "garden note"), ids(&before, "garden note"));
        // A word that is already a token, or an id the vocabulary holds, is refused.
        assert!(with_whole_words(&json, &["garden".to_owned()], first).is_err());
        assert!(with_whole_words(&json, &["notes".to_owned()], first - 1).is_err());
        let mut beyond: serde_json::Value = serde_json::from_slice(&json).unwrap();
        beyond["added_tokens"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"id": first, "content": "[NEW]"}));
        let beyond = serde_json::to_vec(&beyond).unwrap();
        assert!(with_whole_words(&beyond, &["notes".to_owned()], first).is_err());
    }

    #[test]
    fn corpus_words_that_split_into_pieces_and_recur_are_added_most_used_first() {
        let (_, tokenizer, _) = tiny_bert();
        let tokenizer = model::parse_tokenizer(&tokenizer).unwrap();
        // The tiny vocabulary has "note", "garden" and "##s": "notes" and "gardens" split,
        // "garden" does not, "zebra" is one unknown token, "foxs" is used twice, "the" is short.
        let sections = [
            "Notes gardens notes the zebra".to_owned(),
            "gardens notes, garden garden the zebra foxs".to_owned(),
            "notes; gardens garden zebra zebra zebra foxs the the the".to_owned(),
        ];
        let words = corpus_words(&tokenizer, &sections).unwrap();
        assert_eq!(words, ["notes", "gardens"]);
    }

    #[test]
    fn bert_configs_that_would_panic_or_allocate_are_refused_first() {
        let (config, tokenizer, weights) = tiny_bert();
        for (field, value, says) in [
            ("num_attention_heads", 0, "num_attention_heads is 0"),
            (
                "num_attention_heads",
                3,
                "not a multiple of num_attention_heads",
            ),
            ("hidden_size", 0, "hidden_size is 0"),
            (
                "max_position_embeddings",
                1u64 << 40,
                "max_position_embeddings is",
            ),
            ("num_hidden_layers", 100_000, "num_hidden_layers is"),
            ("vocab_size", 5, "token id 11"),
        ] {
            let mut c = config.clone();
            c[field] = value.into();
            let c = serde_json::to_vec(&c).unwrap();
            let e = Transformer::from_bytes(&c, &tokenizer, weights.clone())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{field} = {value}: {e}");
        }
    }

    #[test]
    fn later_ranks_weigh_more() {
        let mut t = vec![1.0f32; 4 * 1000];
        weight_by_rank(&mut t, 4);
        assert!(t[0] < t[4 * 10] && t[4 * 10] < t[4 * 999]);
        assert!(t[4 * 999] <= 1.0 && t[0] > 0.0);
    }
}
