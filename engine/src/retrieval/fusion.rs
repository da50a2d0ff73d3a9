//! Reciprocal rank fusion: score(d) = Σ_lists 1 / (c + rank(d)), rank from 1.

use super::Hit;
use std::collections::HashMap;

/// The usual constant (Cormack et al.).
pub const RRF_C: f32 = 60.0;

pub fn rrf(lists: &[&[Hit]], k: usize, c: f32) -> Vec<Hit> {
    let mut scores: HashMap<&str, f32> = HashMap::new();
    for list in lists {
        for (rank, h) in list.iter().enumerate() {
            *scores.entry(h.id.as_str()).or_default() += 1.0 / (c + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<Hit> = scores.into_iter().map(|(id, score)| Hit { id: id.to_string(), score }).collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    out.truncate(k);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_wins() {
        let h = |id: &str| Hit { id: id.into(), score: 0.0 };
        let a = [h("x"), h("y"), h("z")];
        let b = [h("y"), h("w"), h("x")];
        let fused = rrf(&[&a, &b], 3, RRF_C);
        assert_eq!(fused[0].id, "y"); // ranks 2 and 1
        assert_eq!(fused[1].id, "x"); // ranks 1 and 3
        assert_eq!(fused.len(), 3);
    }
}
