//! The embedder port: text → dense vectors, off the async reactor, in batches.

use crate::Result;
use async_trait::async_trait;

/// Turns texts into unit-length vectors of `dim()` dimensions (cosine = dot product).
#[async_trait]
pub trait Embedder: Send + Sync {
    fn dim(&self) -> usize;
    /// Model name for logs and stored metadata.
    fn model(&self) -> &str;
    /// Embed `texts` in order.
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>>;
}

/// Cosine similarity of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
