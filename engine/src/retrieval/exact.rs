//! Exact (brute-force) cosine search over unit vectors: the reference an approximate index's
//! recall is measured against, and fast enough on its own for small corpora.

use super::{ApiText, Filter, Hit};
use std::cmp::Ordering;

/// Exact nearest-neighbour search over vectors in memory (small corpora, tests).
pub struct ExactIndex {
    docs: Vec<ApiText>,
    dim: usize,
    data: Vec<f32>,
}

impl ExactIndex {
    /// `vectors[i]` belongs to `docs[i]`; vectors are expected unit length.
    pub fn new(docs: Vec<ApiText>, vectors: &[Vec<f32>]) -> Self {
        let dim = vectors.first().map(Vec::len).unwrap_or(0);
        let mut data = Vec::with_capacity(dim * vectors.len());
        for v in vectors {
            data.extend_from_slice(v);
        }
        ExactIndex { docs, dim, data }
    }

    /// How many vectors it holds.
    pub fn len(&self) -> usize {
        self.docs.len()
    }
    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The `k` nearest documents to `query` that pass `filter`.
    pub fn search(&self, query: &[f32], k: usize, filter: &Filter) -> Vec<Hit> {
        if self.dim == 0 || query.len() != self.dim || k == 0 {
            return Vec::new();
        }
        let mut scored: Vec<(f32, usize)> = self
            .data
            .chunks_exact(self.dim)
            .enumerate()
            .filter(|(i, _)| filter.accepts(&self.docs[*i]))
            .map(|(i, row)| (row.iter().zip(query).map(|(a, b)| a * b).sum::<f32>(), i))
            .collect();
        let by_score =
            |a: &(f32, usize), b: &(f32, usize)| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal).then(a.1.cmp(&b.1));
        if scored.len() > k {
            scored.select_nth_unstable_by(k, by_score);
            scored.truncate(k);
        }
        scored.sort_by(by_score);
        scored.into_iter().map(|(s, i)| Hit { id: self.docs[i].id.clone(), score: s }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_first_and_filtered() {
        let d = |id: &str, cat: &str| ApiText {
            id: id.into(),
            text: String::new(),
            category: cat.into(),
            tool: "t".into(),
            status: "active".into(),
        };
        let idx = ExactIndex::new(
            vec![d("x", "A"), d("y", "B"), d("z", "A")],
            &[vec![1.0, 0.0], vec![0.6, 0.8], vec![0.0, 1.0]],
        );
        let hits = idx.search(&[0.8, 0.6], 3, &Filter::default());
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["y", "x", "z"]);
        let hits = idx.search(&[0.8, 0.6], 1, &Filter { category: Some("A".into()), ..Default::default() });
        assert_eq!(hits[0].id, "x");
    }
}
