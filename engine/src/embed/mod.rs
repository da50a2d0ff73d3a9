//! The embedder port: text → dense vectors, off the async reactor, in batches.

use crate::Result;
use async_trait::async_trait;

/// Turns texts into unit-length vectors of `dim()` dimensions (cosine = dot product).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The length of the vectors it returns.
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

/// Vectors by text, and the texts in the order they came in.
type Seen = (std::collections::HashMap<String, Vec<f32>>, std::collections::VecDeque<String>);

/// An [`Embedder`] that remembers the vectors of the last `capacity` texts it embedded (FIFO), so
/// a repeated request skips the model. Vectors are the inner model's, bit for bit.
pub struct Memoized {
    inner: std::sync::Arc<dyn Embedder>,
    capacity: usize,
    seen: std::sync::Mutex<Seen>,
}

impl Memoized {
    /// An embedder that keeps the vectors of the last `capacity` texts it embedded.
    pub fn new(inner: std::sync::Arc<dyn Embedder>, capacity: usize) -> Self {
        Memoized { inner, capacity: capacity.max(1), seen: Default::default() }
    }
}

#[async_trait::async_trait]
impl Embedder for Memoized {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        let mut out: Vec<Option<Vec<f32>>> = {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            texts.iter().map(|t| seen.0.get(t).cloned()).collect()
        };
        let missing: Vec<String> =
            texts.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(t, _)| t.clone()).collect();
        if !missing.is_empty() {
            let fresh = self.inner.embed(missing.clone()).await?;
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            let mut it = fresh.into_iter();
            for (slot, text) in out.iter_mut().zip(&texts) {
                if slot.is_none() {
                    let v = it.next().unwrap_or_default();
                    if !seen.0.contains_key(text) {
                        seen.1.push_back(text.clone());
                    }
                    seen.0.insert(text.clone(), v.clone());
                    *slot = Some(v);
                }
            }
            while seen.1.len() > self.capacity {
                if let Some(old) = seen.1.pop_front() {
                    seen.0.remove(&old);
                }
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A stand-in model (tests only): the vector is the text's length; counts texts embedded.
    struct CountingFakeEmbedder(AtomicUsize);

    #[async_trait]
    impl Embedder for CountingFakeEmbedder {
        fn dim(&self) -> usize {
            1
        }
        fn model(&self) -> &str {
            "fake"
        }
        async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
            self.0.fetch_add(texts.len(), Ordering::Relaxed);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[tokio::test]
    async fn memoized_embeds_each_text_once_within_capacity_and_keeps_order() {
        let inner = Arc::new(CountingFakeEmbedder(AtomicUsize::new(0)));
        let m = Memoized::new(inner.clone(), 2);
        assert_eq!(m.embed(vec!["a".into(), "bbb".into()]).await.unwrap(), vec![vec![1.0], vec![3.0]]);
        assert_eq!(
            m.embed(vec!["bbb".into(), "a".into(), "cc".into()]).await.unwrap(),
            vec![vec![3.0], vec![1.0], vec![2.0]]
        );
        assert_eq!(inner.0.load(Ordering::Relaxed), 3, "only `cc` was new");
        // Capacity 2: `a` (oldest) was dropped when `cc` came in.
        m.embed(vec!["a".into()]).await.unwrap();
        assert_eq!(inner.0.load(Ordering::Relaxed), 4);
    }
}
