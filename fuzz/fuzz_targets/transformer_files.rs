//! Fuzzes the transformer option's loader: a sentence-transformers BERT folder's three files
//! (`config.json`, `tokenizer.json`, `model.safetensors`) as `Transformer::from_bytes` parses
//! them (serde_json, the `tokenizers` crate, candle's safetensors loader and BERT builder),
//! then the model run on a few texts. Two little-endian lengths (u16 for the config, u32 for
//! the tokenizer) cut the input into the three files. A model that loads must give each text
//! a vector of its width, unit length or zero (a text of no token, or numbers that overflow),
//! never a NaN; a bad folder is an error, never a panic or an allocation beyond the input's
//! size. The seed is a tiny valid BERT (`fuzz/seeds/transformer_files/tiny_bert`, made by
//! `fuzz/seeds/make_tiny_bert.py`).

#![no_main]

use capvault::semantic::import::Transformer;
use libfuzzer_sys::fuzz_target;

#[path = "shared/three_files.rs"]
mod shared;
use shared::three_files;

fuzz_target!(|data: &[u8]| {
    // As in model_files.rs: let the panics capvault catches on purpose be caught.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let Some((config, tokenizer, weights)) = three_files(data) else {
        return;
    };
    let Ok(t) = Transformer::from_bytes(config, tokenizer, weights.to_vec()) else {
        return;
    };
    let dims = t.info().dimensions;
    assert!(dims > 0);
    let texts = ["", "a", "the quick brown fox", "Ünïcödé – 日本語 🙂"];
    if let Ok(vectors) = t.embed(&texts) {
        assert_eq!(vectors.len(), texts.len());
        for v in vectors {
            assert_eq!(v.len(), dims);
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!(norm == 0.0 || (norm - 1.0).abs() < 1e-3, "norm {norm}");
        }
    }
});
