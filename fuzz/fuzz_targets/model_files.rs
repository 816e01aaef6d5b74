//! Fuzzes what semantic search reads from files it did not write in this run: a static model's
//! three files (`config.json`, `tokenizer.json`, `model.safetensors`, parsed from bytes by
//! `StaticModel::from_bytes`) and the embeddings cache (`semantic::saved::decode`).
//!
//! The first byte picks the parser. For a model, two little-endian lengths (u16 for the
//! config, u32 for the tokenizer) cut the rest into the three files; a model that loads must
//! embed a text to a unit vector of its dimensions, or to nothing. For the cache, the rest is
//! the body after a valid header and the harness seals it with a correct sha256, so the
//! fuzzer explores the structural checks behind the checksum; a store that loads must save
//! and load back to the same notes and sections.

#![no_main]

use capvault::semantic::StaticModel;
use capvault::semantic::saved::{self, MAGIC};
use libfuzzer_sys::fuzz_target;

#[path = "shared/three_files.rs"]
mod shared;
use sha2::{Digest, Sha256};
use shared::three_files;

const FP: [u8; 32] = [0x5a; 32];

fn model(data: &[u8]) {
    let Some((config, tokenizer, weights)) = three_files(data) else {
        return;
    };
    let Ok(m) = StaticModel::from_bytes(config, tokenizer, weights, "fuzz") else {
        return;
    };
    let dims = m.dimensions();
    assert!(dims > 0);
    for text in ["", "a", "the quick brown fox", "Ünïcödé – 日本語 🙂"] {
        if let Some(v) = m.embed(text) {
            assert_eq!(v.len(), dims);
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-3, "norm {norm}");
        }
    }
}

fn cache(data: &[u8]) {
    let Some((&d, body)) = data.split_first() else {
        return;
    };
    let dims = usize::from(d % 8) + 1;
    let mut bytes = Vec::with_capacity(body.len() + 96);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&saved::FORMAT.to_le_bytes());
    bytes.extend_from_slice(&FP);
    bytes.extend_from_slice(&(dims as u32).to_le_bytes());
    bytes.extend_from_slice(body);
    let digest = Sha256::digest(&bytes);
    bytes.extend_from_slice(&digest);
    let Ok((store, lines)) = saved::decode(&bytes, &FP, dims) else {
        return;
    };
    let again = saved::encode(&store, &FP, &lines);
    let (back, lines_back) = saved::decode(&again, &FP, dims).expect("a saved store loads back");
    assert_eq!(lines_back, lines);
    assert_eq!(back.len(), store.len());
    assert_eq!(back.sections(), store.sections());
    assert_eq!(saved::encode(&back, &FP, &lines_back), again);
    let q = vec![1.0; dims];
    assert_eq!(
        back.nearest(&q, 5, |_| true),
        store.nearest(&q, 5, |_| true)
    );
}

fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys's panic hook aborts on every panic, even one the code under test catches
    // on purpose (the `tokenizers` crate panics on some malformed files, and capvault turns
    // that into an error). The plain hook lets those be caught; a panic that escapes into this
    // closure still aborts (libfuzzer-sys checks for it).
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    match data.split_first() {
        Some((0, rest)) => model(rest),
        Some((_, rest)) => cache(rest),
        None => {}
    }
});
