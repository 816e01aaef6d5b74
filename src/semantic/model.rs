//! A static embedding model (model2vec's format): a tokenizer and one vector per token. A text's
//! embedding is the mean of its tokens' vectors (each scaled by the token's weight, when the
//! model has weights), normalised to unit length. No I/O: the files' bytes come in, already read
//! through a capability handle and capped in size.

use safetensors::{Dtype, SafeTensors};
use tokenizers::Tokenizer;

/// Largest weights file accepted (`model.safetensors`).
pub const MAX_WEIGHTS_BYTES: u64 = 1 << 30;
/// Largest `tokenizer.json` accepted.
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;
/// Largest `config.json` accepted.
pub const MAX_CONFIG_BYTES: u64 = 64 << 10;
/// Most rows (tokens) a model may have.
pub const MAX_VOCABULARY: usize = 2_000_000;
/// Most dimensions a model may have.
pub const MAX_DIMENSIONS: usize = 4096;
/// Most tokens of one text that count towards its embedding (the rest are ignored).
pub const MAX_TOKENS: usize = 2048;

pub use super::vector::{ModelInfo, normalise};

/// Why a model could not be loaded. Messages name the model folder's files, never host paths.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// `config.json` does not parse as a model's config.
    #[error("config.json is not a model config: {0}")]
    NotAConfig(serde_json::Error),
    /// `config.json` names another kind of model.
    #[error(
        "config.json: model_type is {0:?}: capvault serves static models (\"model2vec\") and \
         BERT sentence transformers (\"bert\"), and makes a static model from the latter with \
         capvault model import"
    )]
    OtherModelType(String),
    /// `tokenizer.json` does not parse.
    #[error("tokenizer.json is not a tokenizer: {0}")]
    NotATokenizer(tokenizers::Error),
    /// The tokenizer library panicked on `tokenizer.json`.
    #[error("tokenizer.json is not a tokenizer (the tokenizer library failed on it)")]
    TokenizerPanicked,
    /// The tokenizer refused a setting.
    #[error("tokenizer.json: {0}")]
    Tokenizer(tokenizers::Error),
    /// `model.safetensors` does not parse.
    #[error("model.safetensors is not a safetensors file: {0}")]
    NotSafetensors(safetensors::SafeTensorError),
    /// No `embeddings` tensor.
    #[error("model.safetensors has no `embeddings` tensor")]
    NoEmbeddings,
    /// `embeddings` is not two-dimensional.
    #[error("model.safetensors: `embeddings` is not a matrix")]
    NotAMatrix,
    /// The table is empty or over the caps.
    #[error(
        "model.safetensors: `embeddings` is {rows} x {dims}; at most {MAX_VOCABULARY} x \
         {MAX_DIMENSIONS} and not empty"
    )]
    TableSize { rows: usize, dims: usize },
    /// `config.json` and the table disagree on the dimensions.
    #[error("config.json says {config} dimensions, model.safetensors holds {weights}")]
    DimensionsDiffer { config: usize, weights: usize },
    /// `weights` is not one per row.
    #[error("model.safetensors: `weights` has the wrong shape")]
    WeightsShape,
    /// `mapping` names a row the table does not have.
    #[error("model.safetensors: `mapping` points past the table")]
    MappingPastTable,
    /// `mapping` is not one-dimensional.
    #[error("model.safetensors: `mapping` is not a vector")]
    MappingNotVector,
    /// A row in `mapping` is negative or too large.
    #[error("model.safetensors: `mapping` holds a negative or huge row")]
    MappingRow,
    /// `mapping` is not of integers.
    #[error("model.safetensors: `mapping` is {0:?}; I32 or I64 expected")]
    MappingType(Dtype),
    /// The tokenizer has tokens the model has no row for.
    #[error("the tokenizer has {vocab} tokens but the model covers {reach}")]
    TokensUncovered { vocab: usize, reach: usize },
    /// A table whose length is not a multiple of its dimensions.
    #[error("the table is not a whole number of rows")]
    PartialRow,
    /// A table shorter than the tokenizer's vocabulary.
    #[error("the tokenizer has more tokens than the table has rows")]
    TokensBeyondTable,
    /// A tensor of floats in another type.
    #[error("model.safetensors: `{name}` is {dtype:?}; F32, F16 or BF16 expected")]
    FloatType { name: String, dtype: Dtype },
    /// A NaN or an infinity.
    #[error("model.safetensors: `{0}` holds a value that is not a finite number")]
    NotFinite(String),
    /// The weights file could not be made.
    #[error("{0}")]
    Write(safetensors::SafeTensorError),
}

/// A loaded static model.
pub struct StaticModel {
    tokenizer: Tokenizer,
    /// `vocabulary` rows of `dimensions` codes: a value is its code times its row's scale.
    /// Eight bits a value, a quarter of the memory of the file's floats (8 MB instead of 31
    /// for a 30,522-token, 256-dimension model); a text's vector moves by well under 1%.
    codes: Vec<i8>,
    /// Each row's scale, its token weight (model2vec's, when the model has them) folded in.
    scales: Vec<f32>,
    /// Token id → row, when the model maps tokens to shared rows.
    mapping: Option<Vec<u32>>,
    info: ModelInfo,
    /// sha256 of the files it was loaded from: vectors of another fingerprint are another space.
    fingerprint: [u8; 32],
}

impl std::fmt::Debug for StaticModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticModel")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// The parts of model2vec's `config.json` capvault reads.
#[derive(Debug, serde::Deserialize)]
struct Config {
    #[serde(default)]
    model_type: Option<String>,
    #[serde(default)]
    hidden_dim: Option<usize>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    revision: Option<String>,
}

impl StaticModel {
    /// A model from the bytes of its three files. `default_name` names it when its config does
    /// not.
    pub fn from_bytes(
        config_bytes: &[u8],
        tokenizer_bytes: &[u8],
        weights: &[u8],
        default_name: &str,
    ) -> Result<StaticModel, ModelError> {
        let config: Config =
            serde_json::from_slice(config_bytes).map_err(ModelError::NotAConfig)?;
        if let Some(t) = &config.model_type
            && t != "model2vec"
        {
            return Err(ModelError::OtherModelType(t.clone()));
        }
        let mut tokenizer = parse_tokenizer(tokenizer_bytes)?;
        // A transformer's tokenizer cuts at its context length and pads; a static model reads
        // every token of a section ([`MAX_TOKENS`] bounds it).
        tokenizer
            .with_truncation(None)
            .map_err(ModelError::Tokenizer)?;
        tokenizer.with_padding(None);
        let tensors = SafeTensors::deserialize(weights).map_err(ModelError::NotSafetensors)?;
        let emb = tensors
            .tensor("embeddings")
            .map_err(|_| ModelError::NoEmbeddings)?;
        let &[rows, dims] = emb.shape() else {
            return Err(ModelError::NotAMatrix);
        };
        if rows == 0 || rows > MAX_VOCABULARY || dims == 0 || dims > MAX_DIMENSIONS {
            return Err(ModelError::TableSize { rows, dims });
        }
        if let Some(h) = config.hidden_dim
            && h != dims
        {
            return Err(ModelError::DimensionsDiffer {
                config: h,
                weights: dims,
            });
        }
        let table = floats(emb.dtype(), emb.data(), "embeddings")?;
        let weights_row = match tensors.tensor("weights") {
            Ok(w) if w.shape() == [rows] => Some(floats(w.dtype(), w.data(), "weights")?),
            Ok(_) => return Err(ModelError::WeightsShape),
            Err(_) => None,
        };
        let mapping = match tensors.tensor("mapping") {
            Ok(m) if m.shape().len() == 1 => {
                let ids = integers(m.dtype(), m.data())?;
                if ids.iter().any(|&i| i as usize >= rows) {
                    return Err(ModelError::MappingPastTable);
                }
                Some(ids)
            }
            Ok(_) => return Err(ModelError::MappingNotVector),
            Err(_) => None,
        };
        let vocab = tokenizer.get_vocab_size(true);
        let reach = mapping.as_ref().map_or(rows, Vec::len);
        if vocab > reach {
            return Err(ModelError::TokensUncovered { vocab, reach });
        }
        let info = ModelInfo {
            name: config
                .name
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| default_name.to_owned())
                .chars()
                .take(200)
                .collect(),
            revision: config.revision.map(|r| r.chars().take(100).collect()),
            dimensions: dims,
            vocabulary: rows,
        };
        let (codes, scales) = quantised(&table, dims, weights_row.as_deref());
        Ok(StaticModel {
            tokenizer,
            codes,
            scales,
            mapping,
            info,
            fingerprint: fingerprint(&[config_bytes, tokenizer_bytes, weights]),
        })
    }

    /// Records `revision` as the one the model was made from, unless its config said.
    pub fn fill_revision(&mut self, revision: &str) {
        if self.info.revision.is_none() {
            self.info.revision = Some(revision.chars().take(100).collect());
        }
    }

    /// A model from a tokenizer and a table built in memory (tests, `capvault model import`).
    pub fn from_table(
        tokenizer: Tokenizer,
        table: Vec<f32>,
        dimensions: usize,
        name: &str,
    ) -> Result<StaticModel, ModelError> {
        if dimensions == 0 || table.is_empty() || !table.len().is_multiple_of(dimensions) {
            return Err(ModelError::PartialRow);
        }
        let rows = table.len() / dimensions;
        if tokenizer.get_vocab_size(true) > rows {
            return Err(ModelError::TokensBeyondTable);
        }
        let bytes: Vec<u8> = table.iter().flat_map(|x| x.to_le_bytes()).collect();
        let (codes, scales) = quantised(&table, dimensions, None);
        Ok(StaticModel {
            fingerprint: fingerprint(&[name.as_bytes(), &bytes]),
            tokenizer,
            codes,
            scales,
            mapping: None,
            info: ModelInfo {
                name: name.to_owned(),
                revision: None,
                dimensions,
                vocabulary: rows,
            },
        })
    }

    /// What the model is.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// sha256 of what the model was loaded from (its files, each with its length in front).
    pub fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }

    /// Dimensions of its vectors.
    pub fn dimensions(&self) -> usize {
        self.info.dimensions
    }

    /// The embedding of `text`, unit length; `None` when no token of it is known.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        // The tokenizer is the user's file run by a library that panics on some of them:
        // a panic here is a text that does not embed, never a dead embedding thread.
        let encoding = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.tokenizer.encode_fast(text, false)
        }))
        .ok()?
        .ok()?;
        let dims = self.info.dimensions;
        let mut sum = vec![0f32; dims];
        let mut count = 0f32;
        for &id in encoding.get_ids().iter().take(MAX_TOKENS) {
            let row = match &self.mapping {
                Some(m) => match m.get(id as usize) {
                    Some(&r) => r as usize,
                    None => continue,
                },
                None => id as usize,
            };
            let (Some(v), Some(&scale)) = (
                self.codes.get(row * dims..(row + 1) * dims),
                self.scales.get(row),
            ) else {
                continue;
            };
            for (s, &c) in sum.iter_mut().zip(v) {
                *s += scale * f32::from(c);
            }
            count += 1.0;
        }
        if count == 0.0 {
            return None;
        }
        normalise(&mut sum).then_some(sum)
    }
}

/// `table` (rows of `dims` floats) as 8-bit codes and one scale per row, each row's weight
/// folded into its scale.
fn quantised(table: &[f32], dims: usize, weights: Option<&[f32]>) -> (Vec<i8>, Vec<f32>) {
    let mut codes = Vec::with_capacity(table.len());
    let scales = table
        .chunks_exact(dims)
        .enumerate()
        .map(|(i, row)| {
            let w = weights.and_then(|w| w.get(i)).copied().unwrap_or(1.0);
            let scale = super::store::quantise(row, &mut codes) * w;
            if scale.is_finite() { scale } else { 0.0 }
        })
        .collect();
    (codes, scales)
}

/// A tokenizer from the bytes of a `tokenizer.json`. The `tokenizers` crate panics on some
/// malformed files (an `expect` in its decoder's deserialiser, found by fuzzing): that is a
/// clear error too, not a crash at startup.
pub fn parse_tokenizer(bytes: &[u8]) -> Result<Tokenizer, ModelError> {
    match std::panic::catch_unwind(|| Tokenizer::from_bytes(bytes)) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(ModelError::NotATokenizer(e)),
        Err(_) => Err(ModelError::TokenizerPanicked),
    }
}

/// sha256 over `parts`, each preceded by its length.
pub(crate) fn fingerprint(parts: &[&[u8]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// Little-endian floats of a tensor (F32, or F16/BF16 widened), checked finite.
fn floats(dtype: Dtype, data: &[u8], name: &str) -> Result<Vec<f32>, ModelError> {
    let out: Vec<f32> = match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
            .collect(),
        other => {
            return Err(ModelError::FloatType {
                name: name.to_owned(),
                dtype: other,
            });
        }
    };
    if out.iter().any(|x| !x.is_finite()) {
        return Err(ModelError::NotFinite(name.to_owned()));
    }
    Ok(out)
}

/// Little-endian integers of a tensor (I32 or I64), as row numbers.
fn integers(dtype: Dtype, data: &[u8]) -> Result<Vec<u32>, ModelError> {
    let neg = || ModelError::MappingRow;
    match dtype {
        Dtype::I32 => data
            .chunks_exact(4)
            .map(|b| u32::try_from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])).map_err(|_| neg()))
            .collect(),
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|b| {
                let v = i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                u32::try_from(v).map_err(|_| neg())
            })
            .collect(),
        other => Err(ModelError::MappingType(other)),
    }
}

/// IEEE half precision to single precision.
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let frac = u32::from(h & 0x3ff);
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // Subnormal: value = f * 2^-24.
            let v = f as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 112) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

/// The bytes of a model2vec weights file holding `table` (`rows` x `dims`, F32), for
/// `capvault model import` and tests.
pub fn safetensors_bytes(table: &[f32], dims: usize) -> Result<Vec<u8>, ModelError> {
    let rows = table.len() / dims.max(1);
    let data: Vec<u8> = table.iter().flat_map(|x| x.to_le_bytes()).collect();
    let view = safetensors::tensor::TensorView::new(Dtype::F32, vec![rows, dims], &data)
        .map_err(ModelError::Write)?;
    safetensors::serialize([("embeddings", view)], None).map_err(ModelError::Write)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A word-level tokenizer over `words` (ids in order), lower-casing, splitting on
    /// whitespace and punctuation.
    pub(crate) fn tokenizer(words: &[&str]) -> Tokenizer {
        let vocab: serde_json::Map<String, serde_json::Value> = words
            .iter()
            .enumerate()
            .map(|(i, w)| ((*w).to_owned(), serde_json::json!(i)))
            .collect();
        let json = serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [],
            "normalizer": {"type": "Lowercase"},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": null,
            "decoder": null,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": words[0]}
        });
        Tokenizer::from_bytes(json.to_string().as_bytes()).unwrap()
    }

    /// A tiny model: `[unk]` at the origin, and each group of words sharing one direction.
    pub(crate) fn tiny_model(groups: &[&[&str]]) -> StaticModel {
        let dims = groups.len() + 1;
        let mut words = vec!["[unk]"];
        let mut table = vec![0.0; dims];
        table[dims - 1] = 1e-6;
        for (g, group) in groups.iter().enumerate() {
            for w in *group {
                words.push(w);
                let mut row = vec![0.0; dims];
                row[g] = 1.0;
                table.extend(row);
            }
        }
        StaticModel::from_table(tokenizer(&words), table, dims, "tiny").unwrap()
    }

    #[test]
    fn the_eight_bit_table_embeds_as_the_float_table_does() {
        // Pseudo-random rows of 64 dimensions and very different magnitudes.
        let mut next = crate::semantic::store::tests::floats(0x853c_49e6_748f_ea9b);
        let words = ["[unk]", "alpha", "beta", "gamma", "delta"];
        let dims = 64;
        let table: Vec<f32> = (0..words.len() * dims)
            .map(|i| next() * (1 + i / dims) as f32 * 10.0)
            .collect();
        let m = StaticModel::from_table(tokenizer(&words), table.clone(), dims, "t").unwrap();
        for text in ["alpha beta", "gamma gamma delta alpha", "delta"] {
            let mut want = vec![0f32; dims];
            for w in text.split(' ') {
                let row = words.iter().position(|x| *x == w).unwrap();
                for (s, x) in want.iter_mut().zip(&table[row * dims..(row + 1) * dims]) {
                    *s += x;
                }
            }
            normalise(&mut want);
            let got = m.embed(text).unwrap();
            let cos: f32 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
            assert!(cos > 0.999, "{text}: cosine {cos}");
        }
    }

    fn files(table: &[f32], dims: usize, words: &[&str]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let config = serde_json::json!({"model_type": "model2vec", "hidden_dim": dims});
        let tok = tokenizer(words).to_string(false).unwrap();
        (
            config.to_string().into_bytes(),
            tok.into_bytes(),
            safetensors_bytes(table, dims).unwrap(),
        )
    }

    #[test]
    fn texts_with_words_of_one_group_embed_alike() {
        let m = tiny_model(&[&["cat", "kitten", "feline"], &["car", "engine", "wheel"]]);
        let a = m.embed("A kitten!").unwrap();
        let b = m.embed("the feline, the cat").unwrap();
        let c = m.embed("engine and wheel").unwrap();
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f32>();
        assert!(dot(&a, &b) > 0.99, "{a:?} {b:?}");
        assert!(dot(&a, &c) < 0.01);
        assert!((dot(&c, &c) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn a_model_loads_from_the_bytes_of_its_three_files() {
        let words = ["[unk]", "alpha", "beta"];
        let table = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
        let (c, t, w) = files(&table, 2, &words);
        let m = StaticModel::from_bytes(&c, &t, &w, "folder").unwrap();
        assert_eq!(m.info().dimensions, 2);
        assert_eq!(m.info().name, "folder");
        assert_eq!(m.embed("beta").unwrap(), vec![0.0, 1.0]);
    }

    #[test]
    fn bad_model_files_are_clear_errors() {
        let words = ["[unk]", "alpha", "beta"];
        let table = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
        let (c, t, w) = files(&table, 2, &words);
        let err = |c: &[u8], t: &[u8], w: &[u8]| {
            StaticModel::from_bytes(c, t, w, "m")
                .unwrap_err()
                .to_string()
        };
        assert!(err(b"{", &t, &w).contains("config.json"));
        assert!(err(br#"{"model_type":"bert"}"#, &t, &w).contains("model import"));
        assert!(err(&c, b"not json", &w).contains("tokenizer.json"));
        assert!(err(&c, &t, b"junk").contains("safetensors"));
        assert!(err(&c, &t, &w[..w.len() - 3]).contains("safetensors"));
        // Fewer rows than the tokenizer has tokens.
        let (_, _, short) = files(&table[..4], 2, &words);
        assert!(err(&c, &t, &short).contains("tokens"));
        // Dimensions that disagree with the config.
        let c3 = br#"{"model_type":"model2vec","hidden_dim":3}"#;
        assert!(err(c3, &t, &w).contains("dimensions"));
        // A value that is not a number.
        let (_, _, nan) = files(&[0.0, 0.0, f32::NAN, 0.0, 0.0, 1.0], 2, &words);
        assert!(err(&c, &t, &nan).contains("finite"));
    }

    /// Found by the `model_files` fuzz target: a decoder entry the `tokenizers` crate's
    /// deserialiser `expect`s to parse.
    #[test]
    fn a_tokenizer_file_that_panics_the_library_is_a_clear_error() {
        let words = ["[unk]", "alpha", "beta"];
        let table = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
        let (c, t, w) = files(&table, 2, &words);
        // The fuzzer's find: a byte that breaks the JSON inside the decoder's value.
        let t = String::from_utf8(t)
            .unwrap()
            .replace("\"decoder\":null", "\"decoder\":!null");
        assert!(t.contains("!null"));
        let e = StaticModel::from_bytes(&c, t.as_bytes(), &w, "m").unwrap_err();
        assert!(
            e.to_string().contains("the tokenizer library failed"),
            "{e}"
        );
    }

    #[test]
    fn half_precision_values_widen_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0000), 0.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }
}
