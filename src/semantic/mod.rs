//! Semantic search's parts below the engine: the static embedding model ([`model`]), notes cut
//! into sections ([`chunk`]) and the vectors of every note ([`store`]). The model's files are
//! read through [`crate::vault::host`] (a folder handle, no-follow, size-capped) and parsed from
//! bytes. [`fetch`] downloads a pinned model from the Hugging Face hub (`capvault model fetch`,
//! `serve --semantic`), writing through [`crate::vault::download`].

pub mod chunk;
pub mod fetch;
#[cfg(feature = "import")]
pub mod import;
pub mod model;
pub mod saved;
pub mod store;

use std::path::Path;

pub use model::{ModelInfo, StaticModel};
pub use store::VectorStore;

use crate::vault::host::HostFile;

/// The three files of a model folder (`config.json`, `tokenizer.json`, `model.safetensors`),
/// each read through a folder handle without following a symlink and capped at its size limit.
/// Errors start with `what`.
pub(crate) fn read_model_files(dir: &Path, what: &str) -> Result<[Vec<u8>; 3], String> {
    let read = |name: &str, max: u64| {
        HostFile::at(&dir.join(name))
            .and_then(|f| f.read_public(max))
            .map_err(|e| format!("{what}: {e}"))
    };
    Ok([
        read("config.json", model::MAX_CONFIG_BYTES)?,
        read("tokenizer.json", model::MAX_TOKENIZER_BYTES)?,
        read("model.safetensors", model::MAX_WEIGHTS_BYTES)?,
    ])
}

/// Loads the static model in the folder `dir` (`config.json`, `tokenizer.json`,
/// `model.safetensors`). Errors name the folder as the user typed it.
pub fn load_model(dir: &Path) -> Result<StaticModel, String> {
    let [config, tokenizer, weights] = read_model_files(dir, "embedding model")?;
    let (name, revision) = default_name(dir);
    let mut m = StaticModel::from_bytes(&config, &tokenizer, &weights, &name)
        .map_err(|e| format!("embedding model {}: {e}", dir.display()))?;
    if let Some(r) = revision {
        m.fill_revision(r);
    }
    Ok(m)
}

/// The name (and revision) a model's folder gives it when its config names none: a downloaded
/// model's folder (`<owner>--<name>/<commit>`, see [`fetch::ModelSpec::folder_under`]) gives
/// `owner/name` at that commit; any other folder its own name.
fn default_name(dir: &Path) -> (String, Option<&str>) {
    let last = dir.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    let parent = dir
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str());
    match parent.and_then(|p| p.split_once("--")) {
        Some((owner, name)) if fetch::check_revision(last).is_ok() => {
            (format!("{owner}/{name}"), Some(last))
        }
        _ => (last.to_owned(), None),
    }
}
