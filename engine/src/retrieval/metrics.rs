//! Ranking metrics with binary relevance.

use std::collections::HashSet;

/// NDCG@k: DCG = Σ_{i ≤ k} rel_i / log2(i + 1), normalized by the ideal DCG of min(k, |R|) hits.
pub fn ndcg_at(ranked: &[String], relevant: &HashSet<String>, k: usize) -> f64 {
    if relevant.is_empty() || k == 0 {
        return 0.0;
    }
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, id)| relevant.contains(*id))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..k.min(relevant.len())).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
    dcg / ideal
}

/// Recall@k: the share of relevant items in the top k.
pub fn recall_at(ranked: &[String], relevant: &HashSet<String>, k: usize) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let mut seen = HashSet::new();
    let found = ranked.iter().take(k).filter(|id| relevant.contains(*id) && seen.insert(*id)).count();
    found as f64 / relevant.len() as f64
}

/// The value at quantile `q` (0..=1) of `values` (nearest rank).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let idx = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[idx]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn hand_worked_values() {
        let rel: HashSet<String> = ["a", "b"].iter().map(|x| x.to_string()).collect();
        // a at rank 1, b at rank 3: DCG@5 = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) = 1.6309…
        let r = s(&["a", "x", "b", "y", "z"]);
        assert!((ndcg_at(&r, &rel, 5) - 1.5 / (1.0 + 1.0 / 3f64.log2())).abs() < 1e-12);
        assert_eq!(ndcg_at(&r, &rel, 1), 1.0);
        assert_eq!(recall_at(&r, &rel, 1), 0.5);
        assert_eq!(recall_at(&r, &rel, 5), 1.0);
        assert_eq!(ndcg_at(&s(&["x", "y"]), &rel, 5), 0.0);
        assert_eq!(quantile(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.5), 3.0);
        assert_eq!(quantile(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.99), 5.0);
    }
}
