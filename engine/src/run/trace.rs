//! The trace of a run: every step, serializable and streamable as it happens.

use crate::exec::CallError;
use crate::plan::{Decision, Judgement};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A candidate as the trace shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    pub id: String,
    pub source: crate::plan::Source,
    pub weight: f64,
    pub similarity: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceEvent {
    /// Seed tools retrieved for a (sub)task.
    Retrieve {
        subtask: String,
        seeds: Vec<(String, f64)>,
    },
    /// The search of one subtask begins (per-subtask search).
    Subtask {
        index: usize,
        name: String,
        request: String,
        category: Option<String>,
    },
    /// Plan mode: the whole plan (API ids in order) and the solution it follows.
    Plan {
        source: String,
        solution: Vec<String>,
        steps: Vec<String>,
    },
    /// A plan step whose `if` did not hold.
    PlanSkipped {
        step: usize,
        api: String,
        reason: String,
    },
    /// The plan stopped at `step` (1-based; 0: no plan): the graph search goes on from there.
    PlanFailed {
        step: usize,
        reason: String,
    },
    /// A long-term memory recalled for the request: how near the two requests' meanings are
    /// (`score`, the cosine of their embeddings with places, dates and numbers masked), and how
    /// many of this request's dates, times and names the remembered one had no counterpart for.
    Recall {
        request: String,
        score: f32,
        #[serde(default)]
        unserved: usize,
        chain: Vec<String>,
        replayed: bool,
    },
    /// The reading was unsure (which remembered chain serves the request, or which of its
    /// mentions plays which remembered role) and asked the planner: what it was asked
    /// (`memory`, `mentions`) and what it answered (`rules` where it left the rules' choice).
    Unsure {
        about: String,
        answer: String,
    },
    /// An API the request asks for beyond the replayed memory, composed from a fragment of
    /// another memory (`from`: its request); `error` where that fragment failed.
    Composed {
        api: String,
        from: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A replayed memory failed; the search takes over.
    RecallFailed {
        reason: String,
    },
    /// The planner's decision at a node.
    Choose {
        depth: usize,
        offered: Vec<Offered>,
        decision: Decision,
    },
    /// A call about to be sent (references still in `arguments`), and where each argument came
    /// from (request, an earlier output, a default, the user).
    Call {
        label: String,
        api: String,
        arguments: Map<String, Value>,
        #[serde(default)]
        sources: std::collections::BTreeMap<String, crate::plan::ArgSource>,
    },
    /// The run waits for a person to approve this call (APIs that require approval).
    AwaitingApproval {
        label: String,
        call: PendingCall,
    },
    /// The decision on it (a rejection fails the branch; the search goes on).
    Approval {
        api: String,
        decision: ApprovalDecision,
    },
    /// Its response: `observation` is what the planner sees; `response` is the full body;
    /// `sent` the arguments as they went out (references resolved, types coerced to the API's
    /// schema), where the engine sent them (absent in a dry run and for a model's own calls).
    Response {
        label: String,
        api: String,
        status: u16,
        attempts: u32,
        elapsed_ms: f64,
        observation: String,
        response: std::sync::Arc<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent: Option<Map<String, Value>>,
    },
    /// A call that failed (nothing was added to the path).
    CallFailed {
        api: String,
        arguments: Map<String, Value>,
        error: CallError,
        /// The arguments as they went out, where the call was sent and its response refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent: Option<Map<String, Value>>,
    },
    /// Reverse-Chain completion: `provider` is called first to supply `argument` of `api`.
    Insert {
        api: String,
        argument: String,
        provider: String,
    },
    /// Going back one step.
    Backtrack {
        api: String,
        reason: String,
    },
    /// A reflection round: resume from a step, or restart without some tools.
    Reflect {
        round: usize,
        mode: String,
        reason: String,
        resume_at: Option<usize>,
        excluded_tools: Vec<String>,
    },
    /// The planner's verdict on the path.
    Judge {
        judgement: Judgement,
    },
    /// The run needs a value only the user can give.
    NeedsInput {
        api: String,
        missing: Vec<String>,
    },
    Finish {
        answer: String,
    },
    GiveUp {
        reason: String,
    },
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
