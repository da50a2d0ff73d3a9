//! What a run takes and gives: per-request options, the approval port, and the report (status,
//! answer, chain, judgement, trace, stats).

use super::trace::TraceEvent;
pub use super::trace::{ApprovalDecision, PendingCall};
use crate::plan::{Judgement, ModelUsage, Planner};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolgraph_schema::{CallStatus, GraphSnapshot, Mode, Outcome, RecordedCall, RecordedRun};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// How a run ended.
pub enum Status {
    /// Judged complete: every call usable and every part of the request covered.
    Answered,
    /// Some parts done: the answer says which are missing.
    Partial,
    /// Nothing served the request.
    GaveUp,
    /// The user must give a value (see [`NeedsInput`]).
    NeedsInput,
}

impl Status {
    /// Its name in reports and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Answered => "answered",
            Status::Partial => "partial",
            Status::GaveUp => "gave_up",
            Status::NeedsInput => "needs_input",
        }
    }
}

/// Per-request choices over the engine's settings (daemon `POST /v1/orchestrate {planner, mode,
/// model}`, CLI flags).
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Who decides this run (the engine's planner when `None`).
    pub planner: Option<Arc<dyn Planner>>,
    /// Graph search or plan mode (the engine's setting when `None`).
    pub mode: Option<Mode>,
    /// Target-first planning (the engine's setting when `None`).
    pub backward: Option<bool>,
    /// Asked before any call to an API that requires approval (human in the loop).
    pub approver: Option<Arc<dyn Approver>>,
    /// Plan only: nothing is sent. Each call's response is the skeleton of its documented output
    /// fields (every leaf holds its own `$varN.path$` reference), so the search, Reverse Chain and
    /// plan mode run as usual and the chain comes back with its data flow as references. Nothing
    /// is remembered or learned from such a run.
    pub dry_run: bool,
    /// The user the run is made for (a daemon's caller): an API degraded by that user's own
    /// failures is left out of this run only (see [`super::health`]). `None`: the local operator.
    pub caller: Option<String>,
}

/// Decides whether calls to APIs that require approval may be sent. `decide` may wait as long as
/// it needs (the run pauses); a rejection fails that branch and the search goes on.
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Whether calls to `api` need approval.
    fn requires(&self, api: &str) -> bool;
    /// Approves or rejects one call.
    async fn decide(&self, call: &PendingCall) -> ApprovalDecision;
}

/// What the user must give for the run to go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeedsInput {
    /// The API that needs it.
    pub api: String,
    /// The parameters no source could fill.
    pub missing: Vec<String>,
    /// What to ask the user.
    pub message: String,
}

/// One call of the final chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainCall {
    /// The output's label (`var1`).
    pub label: String,
    /// The API's id.
    pub api: String,
    /// The API's name.
    pub name: String,
    /// As planned: references to earlier outputs kept (`$var1.field$`).
    pub arguments: Map<String, Value>,
    /// As sent.
    pub sent: Map<String, Value>,
    /// The subtask (index into the decomposition) this call served, when searched per subtask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtask: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
/// Counters and timings of a run.
pub struct RunStats {
    /// Decisions asked of the planner.
    pub planner_calls: u64,
    /// HTTP calls sent (retries included).
    pub http_calls: u64,
    /// Calls that failed.
    pub failed_calls: u64,
    /// Backtracks of the search.
    pub backtracks: u64,
    /// Reflection rounds.
    pub reflections: u64,
    /// Whether a remembered chain was replayed.
    pub recalled: bool,
    /// Wall time of the run.
    pub total_ms: f64,
    /// Time inside HTTP calls to the tools.
    pub http_ms: f64,
    /// Time embedding the request.
    pub embed_ms: f64,
    /// Time in seed retrieval (lexical + vector search; part of engine_ms).
    pub retrieve_ms: f64,
    /// LLM calls and tokens of this run, by configured model name.
    #[serde(default)]
    pub llm: std::collections::BTreeMap<String, ModelUsage>,
    /// Plan mode: whether a plan was made, and at which step it fell back to the search.
    #[serde(default)]
    pub planned: bool,
    #[serde(default)]
    /// The plan's step the search took over at.
    pub plan_fallback_at: Option<usize>,
    /// Planned only ([`RunOptions::dry_run`]): no call was sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// total − http − embed: what the engine itself spent.
    pub engine_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// What a run gives back: its status, answer, chain, judgement, trace and stats.
pub struct RunReport {
    /// The request.
    pub request: String,
    /// How it ended.
    pub status: Status,
    /// The answer.
    pub answer: String,
    /// The calls that served it, in order.
    pub chain: Vec<ChainCall>,
    /// What the user must give, where the run waits for it.
    pub needs_input: Option<NeedsInput>,
    /// The judge's verdict.
    pub judgement: Option<Judgement>,
    /// Every step, as it happened.
    pub trace: Vec<TraceEvent>,
    /// Counters and timings.
    pub stats: RunStats,
    /// The full response of each chain call, in chain order (the trace holds them too); what a
    /// session carries into its next turn.
    #[serde(skip)]
    pub responses: Vec<Arc<Value>>,
}

impl RunReport {
    /// This run as a trajectory in toolgraph's own JSONL format ([`RecordedRun`]): the chain's calls
    /// with their tool and category from `graph`, the arguments as sent, the responses, and the
    /// outcome (`answered`, else `gave_up` for a run that gave up, else `failed`). What a run
    /// contributes as an example of how its APIs are called; planned-only runs sent nothing and
    /// come out with their planned arguments and no responses.
    pub fn recorded(&self, id: Option<String>, graph: &GraphSnapshot) -> RecordedRun {
        let calls = self
            .chain
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let node = graph.apis.get(&c.api);
                RecordedCall {
                    tool: node.map(|n| n.tool.clone()).unwrap_or_default(),
                    api: c.name.clone(),
                    category: node.map(|n| n.category.clone()),
                    arguments: Value::Object(if self.stats.dry_run { c.arguments.clone() } else { c.sent.clone() }),
                    status: CallStatus::Ok,
                    error: None,
                    response: self.responses.get(i).filter(|_| !self.stats.dry_run).map(|r| (**r).clone()),
                    label: Some(c.label.clone()),
                }
            })
            .collect();
        let outcome = match self.status {
            Status::Answered => Outcome::Answered,
            Status::GaveUp => Outcome::GaveUp,
            Status::Partial | Status::NeedsInput => Outcome::Failed,
        };
        RecordedRun {
            id,
            request: self.request.clone(),
            calls,
            outcome,
            answer: (!self.answer.is_empty()).then(|| self.answer.clone()),
        }
    }
}

/// What the graph took from one run: counts and edges, and status changes of failing APIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunLearning {
    /// The counts and edges it added.
    pub learned: Learned,
    /// APIs whose status changed (degraded, restored).
    pub status_changes: Vec<toolgraph_schema::StatusChange>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgraph_schema::ApiNode;

    fn report(status: Status, dry_run: bool) -> RunReport {
        let call = |label: &str, api: &str, name: &str, arg: Value, sent: Value| ChainCall {
            label: label.into(),
            api: api.into(),
            name: name.into(),
            arguments: arg.as_object().cloned().unwrap(),
            sent: sent.as_object().cloned().unwrap(),
            subtask: None,
        };
        RunReport {
            request: "hotels in Paris".into(),
            status,
            answer: "Hotel Lutetia".into(),
            chain: vec![
                call(
                    "var1",
                    "travel/booking/search_dest",
                    "search_dest",
                    serde_json::json!({"query": "Paris"}),
                    serde_json::json!({"query": "Paris"}),
                ),
                call(
                    "var2",
                    "travel/booking/search_hotels",
                    "search_hotels",
                    serde_json::json!({"dest_id": "$var1.dest_id$"}),
                    serde_json::json!({"dest_id": "-1456928"}),
                ),
            ],
            needs_input: None,
            judgement: None,
            trace: Vec::new(),
            stats: RunStats { dry_run, ..RunStats::default() },
            responses: vec![
                Arc::new(serde_json::json!({"dest_id": "-1456928"})),
                Arc::new(serde_json::json!({"hotels": ["Hotel Lutetia"]})),
            ],
        }
    }

    fn graph() -> GraphSnapshot {
        let mut g = GraphSnapshot::default();
        for (id, name) in
            [("travel/booking/search_dest", "search_dest"), ("travel/booking/search_hotels", "search_hotels")]
        {
            g.apis.insert(
                id.into(),
                ApiNode {
                    id: id.into(),
                    name: name.into(),
                    tool: "Booking".into(),
                    category: "Travel".into(),
                    ..ApiNode::default()
                },
            );
        }
        g
    }

    #[test]
    fn a_run_report_becomes_a_recorded_run_with_the_arguments_sent_and_the_responses() {
        let r = report(Status::Answered, false).recorded(Some("run_1".into()), &graph());
        assert_eq!(r.outcome, Outcome::Answered);
        assert_eq!(r.calls.len(), 2);
        assert_eq!(
            (r.calls[1].tool.as_str(), r.calls[1].category.as_deref(), r.calls[1].label.as_deref()),
            ("Booking", Some("Travel"), Some("var2"))
        );
        assert_eq!(
            r.calls[1].arguments,
            serde_json::json!({"dest_id": "-1456928"}),
            "the value as sent, not the reference"
        );
        assert_eq!(r.calls[0].response, Some(serde_json::json!({"dest_id": "-1456928"})));
        // It reads back as a trajectory line.
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<RecordedRun>(&line).unwrap(), r);
    }

    #[test]
    fn a_planned_only_run_keeps_its_references_and_no_response_and_a_partial_run_failed() {
        let r = report(Status::Partial, true).recorded(None, &graph());
        assert_eq!(r.outcome, Outcome::Failed);
        assert_eq!(r.calls[1].arguments, serde_json::json!({"dest_id": "$var1.dest_id$"}));
        assert!(r.calls.iter().all(|c| c.response.is_none()));
        assert_eq!(report(Status::GaveUp, false).recorded(None, &graph()).outcome, Outcome::GaveUp);
    }
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
