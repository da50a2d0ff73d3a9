//! The graph learns from the engine's own runs (thesis §3.5), as it learns from ingested
//! trajectories: every call a run sent adds to its API's `calls` / `successes` (availability), and
//! an `answered` run adds its chain to the `NEXT` counts (START → first, …, last → END) exactly as
//! an ingested trajectory with that chain would. The run's id is the ledger key (`run:ID`), written
//! in the same atomic write as the counts, so a replayed or retried run never counts twice. The
//! weights of every source whose edges changed are recomputed.

use super::trace::TraceEvent;
use super::{RunReport, Status};
use crate::exec::CallError;
use crate::graph::write::{ContributionWriter, ExampleSink};
use crate::graph::GraphStore;
use crate::Result;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolgraph_schema::{Contribution, Example, ExampleCall, ResolvedCall, WeightSettings};

/// One call a run sent to a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct SentCall {
    pub api: String,
    pub ok: bool,
    /// The tool refused it for its arguments (a 4xx answer, or an error-shaped "no result"): the
    /// caller's mistake, not the API's fault. Only faults of the API (5xx, timeouts, connection
    /// errors, after retries) count against its health.
    pub refused: bool,
    /// The arguments as sent, for a successful call on the final chain (what a health probe can
    /// replay); `None` otherwise.
    pub arguments: Option<Map<String, Value>>,
    /// For a failed call, the arguments it was made with (health tells one request's bad
    /// arguments from an API that fails for every request); `None` otherwise.
    pub failed_with: Option<Map<String, Value>>,
}

/// The calls `report`'s run sent, in order. Calls refused before sending (invalid arguments, an
/// unresolvable reference, an uncallable URL) say nothing about the API and are left out.
pub fn sent_calls(report: &RunReport) -> Vec<SentCall> {
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
pub fn contribution(run_id: &str, report: &RunReport) -> Contribution {
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
pub fn teaches(report: &RunReport) -> bool {
    report.status == Status::Answered && report.judgement.is_some() && !report.stats.recalled
}

/// The ledger key of a run.
pub fn ledger_key(run_id: &str) -> String {
    format!("run:{run_id}")
}

/// What learning from one run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// False when the run had been learned before (nothing changed).
    pub applied: bool,
    pub calls: u64,
    pub successes: u64,
    /// NEXT edge increments (0 unless the run was answered).
    pub edges: u64,
    /// Edges whose weights were recomputed.
    pub weights_recomputed: u64,
    /// Counters of the argument model the run added to (0 unless it taught the model).
    #[serde(default)]
    pub model_counts: u64,
}

/// Edges per weight write when a run's sources are recomputed (a chain touches a few sources).
const WEIGHT_BATCH_ROWS: usize = 1000;

/// Add run `run_id`'s contribution to the graph, once ([`ContributionWriter`], as ingest writes);
/// `sink` learns its example (the argument model), whose increments are applied with it.
pub async fn learn_run(
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
