//! Semantic search's parts below the engine: the static embedding model ([`model`]), notes cut
//! into sections ([`chunk`]) and the vectors of every note ([`store`]). The model's files are
//! read through [`crate::vault::host`] (a folder handle, no-follow, size-capped) and parsed from
//! bytes.

pub mod chunk;
#[cfg(feature = "import")]
pub mod import;
pub mod model;
pub mod saved;
pub mod store;

use std::path::Path;

pub use model::{ModelInfo, StaticModel};
pub use store::VectorStore;

use crate::vault::host::HostFile;

/// Loads the static model in the folder `dir` (`config.json`, `tokenizer.json`,
/// `model.safetensors`). Errors name the folder as the user typed it.
pub fn load_model(dir: &Path) -> Result<StaticModel, String> {
    let read = |name: &str, max: u64| {
        HostFile::at(&dir.join(name))
            .and_then(|f| f.read_public(max))
            .map_err(|e| format!("embedding model: {e}"))
    };
    let config = read("config.json", model::MAX_CONFIG_BYTES)?;
    let tokenizer = read("tokenizer.json", model::MAX_TOKENIZER_BYTES)?;
    let weights = read("model.safetensors", model::MAX_WEIGHTS_BYTES)?;
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    StaticModel::from_bytes(&config, &tokenizer, &weights, name)
        .map_err(|e| format!("embedding model {}: {e}", dir.display()))
}
