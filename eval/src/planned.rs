//! The plan-only harness, for benchmarks scored on the plan itself (NESTFUL, TaskBench): nothing
//! is executed. k-fold over a benchmark's samples: the graph, the API vectors and the long-term
//! memory are learned from the other folds (as in `chains`), then every held-out request is
//! planned by each method as a **dry run** (`RunOptions::dry_run`): each call "returns" the
//! skeleton of its documented output, so the search, Reverse Chain and plan mode run as they do
//! for real and the chain comes back with its data flow as `$varN.field$` references — the
//! benchmarks' own notation.

use crate::chains::{learn_in, HarnessOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::{ExecSettings, Executor};
use toolgraph_engine::run::{Mode, RunOptions, RunSettings};
use toolgraph_ingest::complexfuncbench::{Chain, Spec};
use toolgraph_ingest::IngestError;
use toolgraph_schema::Settings;

/// One call of a plan: the API's name as the benchmark writes it, its label, its arguments
/// (references to earlier outputs kept).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlannedCall {
    pub name: String,
    pub label: String,
    pub arguments: Map<String, Value>,
}

/// One held-out sample planned by one method.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Planned {
    /// Index of the sample in the benchmark's order.
    pub sample: usize,
    pub calls: Vec<PlannedCall>,
    /// The engine's status of the dry run (`answered`: the plan was judged complete).
    pub status: String,
    pub engine_ms: f64,
    /// A memory of a training request was replayed.
    pub recalled: bool,
}

/// The plans of one method, in sample order (samples past `limit` are absent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodPlans {
    pub method: String,
    pub plans: Vec<Planned>,
}

/// Plan every held-out sample with every method (k-fold over `samples`); `progress(done, total)`.
pub async fn plan_folds(
    samples: &[Chain],
    specs: &[Spec],
    category: &str,
    opts: &HarnessOptions,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<MethodPlans>, IngestError> {
    let cache = opts.open_cache()?;
    let k = opts.folds.max(2).min(samples.len().max(2));
    let mut out: Vec<MethodPlans> =
        opts.methods.iter().map(|m| MethodPlans { method: m.name.clone(), plans: Vec::new() }).collect();
    let total = held_out(samples.len(), opts) * opts.methods.len();
    let mut done = 0;
    // Nothing is sent: the executor is never asked, but an engine needs one.
    let exec = Executor::new(ExecSettings::default())?;
    for f in 0..k {
        let train: Vec<&Chain> = samples.iter().enumerate().filter(|(i, _)| i % k != f).map(|(_, c)| c).collect();
        let test: Vec<(usize, &Chain)> =
            samples.iter().enumerate().filter(|(i, _)| i % k == f).take(opts.limit.unwrap_or(usize::MAX)).collect();
        if test.is_empty() {
            continue;
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("toolgraph-plan-eval-fold{f}-"))
            .tempdir()
            .map_err(|e| IngestError::Input(format!("cannot create a temporary folder: {e}")))?;
        let learned = learn_in(dir.path(), &train, specs, category, settings, embedder.clone(), cache.clone()).await?;
        let snapshot = Arc::new(learned.stack.store.snapshot().await?);
        let stack = learned.stack(settings, exec.clone(), opts.planner());
        for (mi, method) in opts.methods.iter().enumerate() {
            let run_settings = RunSettings {
                mode: method.mode,
                backward: method.backward,
                use_memory: matches!(method.mode, Mode::Graph | Mode::Plan) && opts.run.use_memory,
                remember: false,
                learn: false,
                ..opts.run.clone()
            };
            // learn and remember are off: a dry run writes nothing to the fold's stores.
            let engine = stack.engine_over(snapshot.clone(), learned.retriever.clone(), run_settings, None);
            for (i, chain) in &test {
                let r = engine
                    .run_with(
                        chain.input.trim(),
                        Map::new(),
                        Vec::new(),
                        None,
                        RunOptions { dry_run: true, ..RunOptions::default() },
                    )
                    .await?;
                crate::trace_if_asked(&method.name, &r);
                let calls = r
                    .chain
                    .iter()
                    .map(|c| PlannedCall {
                        name: c.name.clone(),
                        label: c.label.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect();
                out[mi].plans.push(Planned {
                    sample: *i,
                    calls,
                    status: r.status.as_str().to_string(),
                    engine_ms: r.stats.engine_ms,
                    recalled: r.stats.recalled,
                });
                done += 1;
                progress(done, total);
            }
        }
    }
    for m in &mut out {
        m.plans.sort_by_key(|p| p.sample);
    }
    Ok(out)
}

/// How many samples of `n` are planned (per method): every one, or `limit` per fold.
pub fn held_out(n: usize, opts: &HarnessOptions) -> usize {
    let k = opts.folds.max(2).min(n.max(2));
    (0..k).map(|f| (0..n).filter(|i| i % k == f).take(opts.limit.unwrap_or(usize::MAX)).count()).sum()
}

/// The median of `v` (0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    toolgraph_engine::retrieval::metrics::quantile(&v, 0.5)
}
