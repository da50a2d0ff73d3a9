//! Edge weights (thesis §3.4–3.5): the static bigram weight and the dynamic weight driven by
//! evaluation scores. One implementation for every store.
//!
//! - static: w0(a→b) = count(a→b) / Σ_c count(a→c), END included, so a node's successors sum to 1;
//! - dynamic: s_j is API j's cumulative score (Δ ∈ [-3, 3] per evaluated run);
//!   f(x) = αx + 1 for x ≥ 0, e^{αx} for x < 0;
//!   w(a→j) = β·w0(a→j) + (1-β)·f(s_j) / Σ_{k ∈ succ(a)} f(s_k).
//!
//! (The thesis prints f(s_i) in the numerator, which cannot vary with j; ToolNet's f(s_j) is meant.)

use crate::GraphStore;
use crate::{EngineError, Result};
use std::collections::{BTreeMap, BTreeSet};
use toolgraph_schema::{EdgeCountRow, WeightRow, WeightSettings};

/// Largest score change one evaluation may give one tool.
pub const MAX_DELTA: f64 = 3.0;

/// The score transfer function f.
pub fn f(x: f64, alpha: f64) -> f64 {
    if x >= 0.0 {
        alpha * x + 1.0
    } else {
        (alpha * x).exp()
    }
}

/// Check α and β: α > 0 keeps f positive and increasing; β ∈ [0, 1] blends.
pub fn validate(params: WeightSettings) -> Result<()> {
    if !(params.alpha.is_finite() && params.alpha > 0.0) {
        return Err(EngineError::Config(format!("weights.alpha must be > 0, got {}", params.alpha)));
    }
    if !(0.0..=1.0).contains(&params.beta) {
        return Err(EngineError::Config(format!("weights.beta must be in [0, 1], got {}", params.beta)));
    }
    Ok(())
}

/// Static and dynamic weights of every edge in `rows`, grouped by source. Rows of one source
/// must all be present (a source's weights depend on all its successors).
pub fn compute(rows: &[EdgeCountRow], params: WeightSettings) -> Vec<WeightRow> {
    let mut by_source: BTreeMap<&str, Vec<&EdgeCountRow>> = BTreeMap::new();
    for r in rows {
        by_source.entry(r.from.as_str()).or_default().push(r);
    }
    let mut out = Vec::with_capacity(rows.len());
    for (from, succ) in by_source {
        let total: u64 = succ.iter().map(|r| r.count).sum();
        let f_sum: f64 = succ.iter().map(|r| f(r.to_score, params.alpha)).sum();
        for r in succ {
            let w0 = if total == 0 { 0.0 } else { r.count as f64 / total as f64 };
            let share = if f_sum > 0.0 { f(r.to_score, params.alpha) / f_sum } else { 0.0 };
            out.push(WeightRow {
                from: from.to_string(),
                to: r.to.clone(),
                static_weight: w0,
                dynamic_weight: params.beta * w0 + (1.0 - params.beta) * share,
            });
        }
    }
    out
}

/// Recompute and store the weights of every edge leaving `sources` (all edges when `None`).
pub async fn recompute(
    store: &dyn GraphStore,
    sources: Option<&[String]>,
    params: WeightSettings,
    chunk: usize,
) -> Result<usize> {
    let chunk = chunk.max(1);
    let mut written = 0;
    match sources {
        None => {
            let rows = store.edge_counts(None).await?;
            for part in compute(&rows, params).chunks(chunk) {
                store.set_weights(part).await?;
                written += part.len();
            }
        }
        Some(ids) => {
            for ids in ids.chunks(chunk) {
                let rows = store.edge_counts(Some(ids)).await?;
                let weights = compute(&rows, params);
                for part in weights.chunks(chunk) {
                    store.set_weights(part).await?;
                }
                written += weights.len();
            }
        }
    }
    Ok(written)
}

/// The dynamic update a run's evaluation triggers: s_i += Δ_i for every judged API, then the
/// weights of every edge out of a predecessor of a judged API are recomputed.
pub async fn apply_evaluation(
    store: &dyn GraphStore,
    deltas: &[(String, f64)],
    params: WeightSettings,
) -> Result<usize> {
    validate(params)?;
    for (id, d) in deltas {
        if !d.is_finite() || d.abs() > MAX_DELTA {
            return Err(EngineError::bad_input(format!(
                "score change for {id} is {d}; it must lie in [-{MAX_DELTA}, {MAX_DELTA}]"
            )));
        }
    }
    if deltas.is_empty() {
        return Ok(0);
    }
    store.add_scores(deltas).await?;
    let targets: Vec<String> = deltas.iter().map(|(id, _)| id.clone()).collect();
    let preds: BTreeSet<String> = store.predecessors(&targets).await?.into_iter().collect();
    let preds: Vec<String> = preds.into_iter().collect();
    recompute(store, Some(&preds), params, 1000).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(from: &str, to: &str, count: u64, to_score: f64) -> EdgeCountRow {
        EdgeCountRow { from: from.into(), to: to.into(), count, to_score }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn f_matches_the_formula() {
        assert!(close(f(0.0, 0.5), 1.0));
        assert!(close(f(2.0, 0.5), 2.0));
        assert!(close(f(-2.0, 0.5), (-1.0f64).exp()));
        // Continuous at 0 and positive everywhere.
        assert!(f(-50.0, 1.0) > 0.0);
    }

    #[test]
    fn hand_worked_weights() {
        // a→b 3 times, a→c once; s_b = 1, s_c = -1; α = 0.5, β = 0.6.
        // w0: 0.75 / 0.25. f(1) = 1.5, f(-1) = e^-0.5 = 0.60653…, Σ = 2.10653…
        // w(a→b) = 0.6·0.75 + 0.4·1.5/2.10653… = 0.7348285151861261
        // w(a→c) = 0.6·0.25 + 0.4·0.60653…/2.10653… = 0.2651714848138739
        let w = compute(&[row("a", "b", 3, 1.0), row("a", "c", 1, -1.0)], WeightSettings { alpha: 0.5, beta: 0.6 });
        assert_eq!(w.len(), 2);
        assert!(close(w[0].static_weight, 0.75) && close(w[1].static_weight, 0.25));
        assert!(close(w[0].dynamic_weight, 0.7348285151861261), "{}", w[0].dynamic_weight);
        assert!(close(w[1].dynamic_weight, 0.2651714848138739), "{}", w[1].dynamic_weight);

        // With END: a→b 2, a→c 1, a→END 1; s_b = 2, s_c = 0, END 0; α = 1, β = 0.5.
        // f: 3, 1, 1 (Σ 5). w(a→b) = 0.5·0.5 + 0.5·3/5 = 0.55; w(a→c) = 0.5·0.25 + 0.5·1/5 = 0.225.
        let w = compute(
            &[row("a", "b", 2, 2.0), row("a", "c", 1, 0.0), row("a", "END", 1, 0.0)],
            WeightSettings { alpha: 1.0, beta: 0.5 },
        );
        let get = |to: &str| w.iter().find(|r| r.to == to).unwrap().dynamic_weight;
        assert!(close(get("b"), 0.55) && close(get("c"), 0.225) && close(get("END"), 0.225));
    }

    #[test]
    fn weights_of_a_source_sum_to_one() {
        let rows = vec![row("a", "b", 5, -3.0), row("a", "c", 7, 2.5), row("a", "END", 1, 0.0), row("x", "y", 4, 0.0)];
        let w = compute(&rows, WeightSettings { alpha: 0.7, beta: 0.3 });
        for src in ["a", "x"] {
            let s: f64 = w.iter().filter(|r| r.from == src).map(|r| r.static_weight).sum();
            let d: f64 = w.iter().filter(|r| r.from == src).map(|r| r.dynamic_weight).sum();
            assert!(close(s, 1.0) && close(d, 1.0), "{src}: {s} {d}");
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(validate(WeightSettings { alpha: 0.0, beta: 0.5 }).is_err());
        assert!(validate(WeightSettings { alpha: 1.0, beta: 1.5 }).is_err());
        assert!(validate(WeightSettings { alpha: 1.0, beta: 0.5 }).is_ok());
    }
}
