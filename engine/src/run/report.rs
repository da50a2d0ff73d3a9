//! What a run takes and gives: per-request options, the approval port, and the report (status,
//! answer, chain, judgement, trace, stats).

use super::trace::TraceEvent;
use super::learn;
use crate::plan::{Judgement, ModelUsage, Planner};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolgraph_schema::Mode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Judged complete: every call usable and every part of the request covered.
    Answered,
    /// Some parts done: the answer says which are missing.
    Partial,
    GaveUp,
    NeedsInput,
}

impl Status {
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
    pub mode: Option<Mode>,
    pub backward: Option<bool>,
    /// Asked before any call to an API that requires approval (human in the loop).
    pub approver: Option<Arc<dyn Approver>>,
    /// Plan only: nothing is sent. Each call's response is the skeleton of its documented output
    /// fields (every leaf holds its own `$varN.path$` reference), so the search, Reverse Chain and
    /// plan mode run as usual and the chain comes back with its data flow as references. Nothing
    /// is remembered or learned from such a run.
    pub dry_run: bool,
}

/// A call waiting for a person's approval: the API and its resolved arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub api: String,
    pub name: String,
    pub arguments: Map<String, Value>,
}

/// A person's decision on a [`PendingCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    Approved { by: String },
    Rejected { by: String, reason: String },
}

/// Decides whether calls to APIs that require approval may be sent. `decide` may wait as long as
/// it needs (the run pauses); a rejection fails that branch and the search goes on.
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    fn requires(&self, api: &str) -> bool;
    async fn decide(&self, call: &PendingCall) -> ApprovalDecision;
}

/// What the user must give for the run to go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeedsInput {
    pub api: String,
    pub missing: Vec<String>,
    pub message: String,
}

/// One call of the final chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainCall {
    pub label: String,
    pub api: String,
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
pub struct RunStats {
    pub planner_calls: u64,
    pub http_calls: u64,
    pub failed_calls: u64,
    pub backtracks: u64,
    pub reflections: u64,
    pub recalled: bool,
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
    pub plan_fallback_at: Option<usize>,
    /// Planned only ([`RunOptions::dry_run`]): no call was sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// total − http − embed: what the engine itself spent.
    pub engine_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub request: String,
    pub status: Status,
    pub answer: String,
    pub chain: Vec<ChainCall>,
    pub needs_input: Option<NeedsInput>,
    pub judgement: Option<Judgement>,
    pub trace: Vec<TraceEvent>,
    pub stats: RunStats,
    /// The full response of each chain call, in chain order (the trace holds them too); what a
    /// session carries into its next turn.
    #[serde(skip)]
    pub responses: Vec<Arc<Value>>,
}

/// What the graph took from one run: counts and edges, and status changes of failing APIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunLearning {
    pub learned: learn::Learned,
    pub status_changes: Vec<toolgraph_schema::StatusChange>,
}
