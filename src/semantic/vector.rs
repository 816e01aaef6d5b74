//! What semantic search needs of a model's output whatever the build: what a model is
//! ([`ModelInfo`]) and vectors made unit length ([`normalise`]). The model runtime itself
//! (`semantic::model`, the `semantic` feature) may be left out of a build.

/// What a model is, as reported to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// Its name (the config's `name`, else the folder's name).
    pub name: String,
    /// The revision it was made from or downloaded at, when known.
    pub revision: Option<String>,
    /// Dimensions of each vector.
    pub dimensions: usize,
    /// Rows of its table.
    pub vocabulary: usize,
}

/// Scales `v` to unit length; false when it is zero (or not finite).
pub fn normalise(v: &mut [f32]) -> bool {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return false;
    }
    for x in v.iter_mut() {
        *x /= norm;
    }
    true
}
