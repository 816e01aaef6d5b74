//! Semantic search's parts below the engine: the static embedding model ([`model`]), notes cut
//! into sections ([`chunk`]) and the vectors of every note ([`store`]). The model's files are
//! read through [`crate::vault::host`] (a folder handle, no-follow, size-capped) and parsed from
//! bytes. [`fetch`] downloads a pinned model from the Hugging Face hub (`capvault model fetch`,
//! `serve --semantic`), writing through [`crate::vault::download`].

pub mod chunk;
#[cfg(feature = "semantic")]
pub mod fetch;
#[cfg(feature = "import")]
pub mod import;
#[cfg(feature = "semantic")]
pub mod model;
pub mod saved;
pub mod store;
#[cfg(feature = "import")]
pub mod tune;
pub mod vector;

use std::path::Path;

#[cfg(feature = "semantic")]
pub use model::StaticModel;
pub use store::VectorStore;
pub use vector::{ModelInfo, normalise};

use crate::vault::host::{Host, HostError};

/// Why a model folder could not be loaded: its files (read through [`Host`]) or what they hold.
/// Messages name the folder as the user typed it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file of the folder could not be read (`what`: whose files, "embedding model"...).
    #[error("{what}: {source}")]
    Files {
        what: &'static str,
        source: HostError,
    },
    /// The files do not make a model.
    #[error("embedding model {dir}: {source}")]
    Model {
        dir: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// This build has no model runtime.
    #[error(
        "semantic search is not in this build of capvault (built without the `semantic` \
         feature): install the full build (README, Install)"
    )]
    NotBuilt,
}

#[cfg(feature = "semantic")]
/// The three files of a model folder (`config.json`, `tokenizer.json`, `model.safetensors`),
/// each read through a folder handle without following a symlink and capped at its size limit.
/// Errors start with `what`.
pub(crate) fn read_model_files(
    host: &Host,
    dir: &Path,
    what: &'static str,
) -> Result<[Vec<u8>; 3], LoadError> {
    let read = |name: &str, max: u64| {
        host.file(&dir.join(name))
            .and_then(|f| f.read_public(max))
            .map_err(|source| LoadError::Files { what, source })
    };
    Ok([
        read("config.json", model::MAX_CONFIG_BYTES)?,
        read("tokenizer.json", model::MAX_TOKENIZER_BYTES)?,
        read("model.safetensors", model::MAX_WEIGHTS_BYTES)?,
    ])
}

/// The model that embeds sections and queries: a static model (the default, fast enough for any
/// vault), or, for a small vault, the sentence-transformers encoder itself (tens of sections a
/// second on two cores; much closer meaning matches). A build without the `semantic` feature
/// has neither: the type has no value, and the engine never has a model.
#[derive(Debug)]
pub enum Embedder {
    /// A static model ([`StaticModel`]).
    #[cfg(feature = "semantic")]
    Static(Box<StaticModel>),
    /// A BERT sentence transformer run in-process ([`import::Transformer`]).
    #[cfg(feature = "import")]
    Transformer(Box<import::Transformer>),
}

impl Embedder {
    /// What the model is.
    pub fn info(&self) -> &ModelInfo {
        match *self {
            #[cfg(feature = "semantic")]
            Embedder::Static(ref m) => m.info(),
            #[cfg(feature = "import")]
            Embedder::Transformer(ref t) => t.info(),
        }
    }

    /// sha256 of what the model was loaded from: vectors of another fingerprint are another
    /// space.
    pub fn fingerprint(&self) -> &[u8; 32] {
        match *self {
            #[cfg(feature = "semantic")]
            Embedder::Static(ref m) => m.fingerprint(),
            #[cfg(feature = "import")]
            Embedder::Transformer(ref t) => t.fingerprint(),
        }
    }

    /// Dimensions of its vectors.
    pub fn dimensions(&self) -> usize {
        self.info().dimensions
    }

    /// True for a transformer (slow: meant for small vaults).
    pub fn is_transformer(&self) -> bool {
        match *self {
            #[cfg(feature = "semantic")]
            Embedder::Static(_) => false,
            #[cfg(feature = "import")]
            Embedder::Transformer(_) => true,
        }
    }

    /// The embedding of `text`, unit length; `None` when the model makes none of it.
    #[cfg_attr(not(feature = "semantic"), allow(unused_variables))]
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        match *self {
            #[cfg(feature = "semantic")]
            Embedder::Static(ref m) => m.embed(text),
            #[cfg(feature = "import")]
            Embedder::Transformer(ref t) => t.embed(&[text]).ok()?.pop(),
        }
    }

    /// The embeddings of `texts`, in order (a transformer runs them as one batch).
    #[cfg_attr(not(feature = "semantic"), allow(unused_variables))]
    pub fn embed_many(&self, texts: &[&str]) -> Vec<Option<Vec<f32>>> {
        match *self {
            #[cfg(feature = "semantic")]
            Embedder::Static(ref m) => texts.iter().map(|t| m.embed(t)).collect(),
            #[cfg(feature = "import")]
            Embedder::Transformer(ref t) => match t.embed(texts) {
                Ok(v) => v.into_iter().map(Some).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "the transformer failed on a note");
                    vec![None; texts.len()]
                }
            },
        }
    }
}

#[cfg(feature = "semantic")]
impl From<StaticModel> for Embedder {
    fn from(m: StaticModel) -> Self {
        Embedder::Static(Box::new(m))
    }
}

/// Loads the model in the folder `dir` (`config.json`, `tokenizer.json`, `model.safetensors`):
/// a static model, or a sentence-transformers BERT folder (its `config.json` says
/// `"model_type": "bert"`), run as a transformer. Errors name the folder as the user typed it.
#[cfg(feature = "semantic")]
pub fn load_model(host: &Host, dir: &Path) -> Result<Embedder, LoadError> {
    let bad = |e: Box<dyn std::error::Error + Send + Sync>| LoadError::Model {
        dir: dir.display().to_string(),
        source: e,
    };
    let [config, tokenizer, weights] = read_model_files(host, dir, "embedding model")?;
    let (name, revision) = default_name(dir);
    #[cfg(feature = "import")]
    if serde_json::from_slice::<serde_json::Value>(&config).is_ok_and(|c| c["model_type"] == "bert")
    {
        let mut t = import::Transformer::from_bytes(&config, &tokenizer, weights)
            .map_err(|e| bad(e.into()))?;
        t.name(name, revision);
        return Ok(Embedder::Transformer(Box::new(t)));
    }
    let mut m =
        StaticModel::from_bytes(&config, &tokenizer, &weights, &name).map_err(|e| bad(e.into()))?;
    if let Some(r) = revision {
        m.fill_revision(r);
    }
    Ok(Embedder::Static(Box::new(m)))
}

/// Without the `semantic` feature: no model loads.
#[cfg(not(feature = "semantic"))]
pub fn load_model(_host: &Host, _dir: &Path) -> Result<Embedder, LoadError> {
    Err(LoadError::NotBuilt)
}

#[cfg(feature = "semantic")]
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
