//! The graph learns from the engine's own runs (thesis §3.5), as it learns from ingested
//! trajectories: every call a run sent adds to its API's `calls` / `successes` (availability), and
//! an `answered` run adds its chain to the `NEXT` counts (START → first, …, last → END) exactly as
//! an ingested trajectory with that chain would. The run's id is the ledger key (`run:ID`), written
//! in the same atomic write as the counts, so a replayed or retried run never counts twice. The
//! weights of every source whose edges changed are recomputed.

use super::engine::Engine;
use super::health::SentCall;
use super::report::{Learned, RunLearning, RunReport, Status};
use super::trace::TraceEvent;
use crate::exec::CallError;
use crate::fill::args::RunTeaches;
use crate::graph::write::{ContributionWriter, ExampleSink};
use crate::graph::{weights, GraphStore};
use crate::Result;
use toolgraph_schema::{Contribution, Example, ExampleCall, ResolvedCall, WeightSettings};

/// The calls `report`'s run sent, in order. Calls refused before sending (invalid arguments, an
/// unresolvable reference, an uncallable URL) say nothing about the API and are left out.
pub(crate) fn sent_calls(report: &RunReport) -> Vec<SentCall> {
    let mut out = Vec::new();
    for e in &report.trace {
        match e {
            TraceEvent::Response { api, label, .. } => {
                let arguments =
                    report.chain.iter().find(|c| &c.label == label && &c.api == api).map(|c| c.sent.clone());
                out.push(SentCall { api: api.clone(), ok: true, refused: false, arguments, failed_with: None });
            }
            TraceEvent::CallFailed { api, arguments, error: CallError::Exhausted { .. }, .. } => out.push(SentCall {
                api: api.clone(),
                ok: false,
                refused: false,
                arguments: None,
                failed_with: Some(arguments.clone()),
            }),
            TraceEvent::CallFailed { api, error: CallError::Rejected { .. }, .. } => {
                out.push(SentCall { api: api.clone(), ok: false, refused: true, arguments: None, failed_with: None })
            }
            _ => {}
        }
    }
    out
}

/// What the run contributes to the graph: its calls, and its chain when it was answered.
pub(crate) fn contribution(run_id: &str, report: &RunReport) -> Contribution {
    Contribution {
        key: ledger_key(run_id),
        attempts: sent_calls(report).into_iter().map(|c| ResolvedCall { api_id: c.api, ok: c.ok }).collect(),
        chain: if report.status == Status::Answered {
            report.chain.iter().map(|c| c.api.clone()).collect()
        } else {
            Vec::new()
        },
        example: teaches(report).then(|| Example {
            request: report.request.clone(),
            calls: report
                .chain
                .iter()
                .map(|c| ExampleCall {
                    api_id: c.api.clone(),
                    label: Some(c.label.clone()),
                    arguments: c.arguments.clone(),
                    response: None,
                })
                .collect(),
        }),
    }
}

/// Whether the argument model learns from the run: answered and judged complete, planned by the
/// search (a recalled chain would teach the model what it taught before).
pub(crate) fn teaches(report: &RunReport) -> bool {
    report.status == Status::Answered && report.judgement.is_some() && !report.stats.recalled
}

/// The ledger key of a run.
pub(crate) fn ledger_key(run_id: &str) -> String {
    format!("run:{run_id}")
}

/// Edges per weight write when a run's sources are recomputed (a chain touches a few sources).
const WEIGHT_BATCH_ROWS: usize = 1000;

/// Add run `run_id`'s contribution to the graph, once ([`ContributionWriter`], as ingest writes);
/// `sink` learns its example (the argument model), whose increments are applied with it.
pub(crate) async fn learn_run(
    store: &dyn GraphStore,
    run_id: &str,
    report: &RunReport,
    params: WeightSettings,
    sink: Option<&dyn ExampleSink>,
) -> Result<Learned> {
    // A run that sent nothing is recorded too: a later run under the same id (a retry) must not
    // count either.
    let c = contribution(run_id, report);
    let (calls, successes) = (c.attempts.len() as u64, c.attempts.iter().filter(|a| a.ok).count() as u64);
    let mut writer = ContributionWriter::new(store).with_sink(sink);
    let batch = writer.write(vec![c]).await?;
    if batch.keys.is_empty() {
        return Ok(Learned::default());
    }
    let recomputed = writer.recompute(params, WEIGHT_BATCH_ROWS, false).await?;
    if writer.marked_dirty() {
        writer.clear_dirty().await?;
    }
    Ok(Learned {
        applied: true,
        calls,
        successes,
        edges: batch.edges.iter().map(|e| e.n).sum(),
        weights_recomputed: recomputed as u64,
        model_counts: batch.counts.len() as u64,
    })
}

/// Learning from the engine's own runs.
impl Engine {
    /// Learn from run `run_id` (its report): API health first (an API that keeps failing is
    /// marked `degraded` in the graph, logged), then — with `run.learn` — calls, successes, the
    /// answered chain and the argument model's counts (a run judged complete) into the graph,
    /// once per run id ([`learn_run`]).
    pub async fn learn_from(&self, run_id: &str, report: &RunReport) -> Result<RunLearning> {
        self.learn_from_caller(run_id, report, None).await
    }

    /// [`Engine::learn_from`] a run made for `caller` (a daemon's user): API health weighs
    /// callers apart, so one caller's failures do not take an API away from the others.
    pub async fn learn_from_caller(
        &self,
        run_id: &str,
        report: &RunReport,
        caller: Option<&str>,
    ) -> Result<RunLearning> {
        let mut out = RunLearning::default();
        // A planned-only run sent nothing: there is nothing to learn from.
        if report.stats.dry_run {
            return Ok(out);
        }
        let Some(store) = &self.store else {
            if self.settings.learn && teaches(report) {
                let chain: Vec<crate::memory::store::MemoryStep> = report
                    .chain
                    .iter()
                    .map(|c| crate::memory::store::MemoryStep {
                        api: c.api.clone(),
                        arguments: c.arguments.clone(),
                        sources: Default::default(),
                    })
                    .collect();
                self.learn_args_in_place(&report.request, &chain);
            }
            return Ok(out);
        };
        let _one = self.learning.lock().await;
        if let Some(h) = &self.health {
            for change in h.observe(&sent_calls(report), caller) {
                if store.set_api_status(&change).await? {
                    tracing::warn!(api = %change.id, status = %change.status, reason = %change.reason, "API status changed");
                    out.status_changes.push(change);
                }
            }
        }
        if self.settings.learn {
            // The argument model in use learns too (read first: its increments are relative to it).
            if teaches(report) {
                if let Err(e) = self.arg_model().await {
                    tracing::warn!(error = %e, "reading the argument model failed: this run teaches the graph's counts only");
                }
            }
            let teaches = RunTeaches(self);
            out.learned = learn_run(store.as_ref(), run_id, report, self.weights, Some(&teaches)).await?;
            // The judgement's evaluation moves the dynamic weights (once: with the run's counts).
            if out.learned.applied && !report.stats.recalled {
                if let Some(j) = &report.judgement {
                    let deltas: Vec<(String, f64)> =
                        j.deltas.iter().filter(|(id, _)| self.apis.contains_key(id)).cloned().collect();
                    weights::apply_evaluation(store.as_ref(), &deltas, self.weights).await?;
                }
            }
            // Retrieval learns too: the request joins the usage vectors of the chain's APIs.
            if out.learned.applied && report.status == Status::Answered {
                let v = self.retriever.embedder().embed(vec![report.request.clone()]).await?.pop().unwrap_or_default();
                let apis: Vec<String> = report.chain.iter().map(|c| c.api.clone()).collect();
                self.retriever.add_usage(&apis, &v).await?;
            }
        }
        Ok(out)
    }
}
