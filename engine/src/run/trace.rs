//! The trace of a run: every step, serializable and streamable as it happens.

use crate::exec::CallError;
use crate::plan::{Decision, Judgement};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A candidate as the trace shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    /// The API's id, or `END`.
    pub id: String,
    /// The graph or the retriever.
    pub source: crate::plan::Source,
    /// Its NEXT weight from the current node.
    pub weight: f64,
    /// Its retrieval similarity to the (sub)task.
    pub similarity: f64,
}

/// A word of the request as written and as the engine read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadAs {
    /// As written.
    pub said: String,
    /// As read.
    pub read: String,
}

/// One step of a run, as the trace (and the daemon's stream) shows it; `type` names the variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceEvent {
    /// Words of the request read as other, known words: typing slips ("tomorow" → "tomorrow").
    /// The run is of the request as read.
    Respelled {
        /// Each word as written and as read, in the order said.
        words: Vec<ReadAs>,
    },
    /// Seed tools retrieved for a (sub)task.
    Retrieve {
        /// The (sub)task's text.
        subtask: String,
        /// The seed APIs and their scores, best first.
        seeds: Vec<(String, f64)>,
    },
    /// The search of one subtask begins (per-subtask search).
    Subtask {
        /// Its index in the decomposition.
        index: usize,
        /// Its name.
        name: String,
        /// Its request.
        request: String,
        /// The category its APIs should come from.
        category: Option<String>,
    },
    /// Plan mode: the whole plan (API ids in order) and the solution it follows.
    Plan {
        /// Who wrote the plan (`user` for one given with the request, else the planner's name).
        source: String,
        /// The solution's APIs, in order.
        solution: Vec<String>,
        /// The plan's API ids, in order.
        steps: Vec<String>,
    },
    /// A plan step whose `if` did not hold.
    PlanSkipped {
        /// The step (1-based).
        step: usize,
        /// The API's id.
        api: String,
        /// Why.
        reason: String,
    },
    /// The plan stopped at `step` (1-based; 0: no plan): the graph search goes on from there.
    PlanFailed {
        /// The step (1-based).
        step: usize,
        /// Why.
        reason: String,
    },
    /// A long-term memory recalled for the request: how near the two requests' meanings are
    /// (`score`, the cosine of their embeddings with places, dates and numbers masked), and how
    /// many of this request's dates, times and names the remembered one had no counterpart for.
    Recall {
        /// The remembered request.
        request: String,
        /// The cosine of the two requests' masked meanings.
        score: f32,
        /// Mentions of this request the remembered one had no counterpart for.
        #[serde(default)]
        unserved: usize,
        /// The remembered chain's APIs, in order.
        chain: Vec<String>,
        /// Whether it was replayed.
        replayed: bool,
        /// The remembered calls a replay leaves out (APIs, in order): the memory is of another
        /// kind, and these served its own request's asks, not this one's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
    },
    /// The reading was unsure (which remembered chain serves the request, or which of its
    /// mentions plays which remembered role) and asked the planner: what it was asked
    /// (`memory`, `mentions`) and what it answered (`rules` where it left the rules' choice).
    Unsure {
        /// What was unsure (`memory` or `mentions`).
        about: String,
        /// The answer.
        answer: String,
    },
    /// An API the request asks for beyond the replayed memory, composed from a fragment of
    /// another memory (`from`: its request); `error` where that fragment failed (`from` empty:
    /// no fragment could be sent, `error` says why).
    Composed {
        /// The API's id.
        api: String,
        /// The remembered request the fragment came from.
        from: String,
        /// Why the fragment failed, where it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A replayed memory failed; the search takes over.
    RecallFailed {
        /// Why.
        reason: String,
    },
    /// The planner's decision at a node.
    Choose {
        /// The path's length at the node.
        depth: usize,
        /// The candidates offered.
        offered: Vec<Offered>,
        /// The decision.
        decision: Decision,
    },
    /// A call about to be sent (references still in `arguments`), and where each argument came
    /// from (request, an earlier output, a default, the user).
    Call {
        /// The output's label (`var1`).
        label: String,
        /// The API's id.
        api: String,
        /// The arguments as planned (references kept).
        arguments: Map<String, Value>,
        /// Where each argument came from.
        #[serde(default)]
        sources: std::collections::BTreeMap<String, crate::plan::ArgSource>,
    },
    /// The run waits for a person to approve this call (APIs that require approval).
    AwaitingApproval {
        /// The output's label (`var1`).
        label: String,
        /// The call waiting.
        call: PendingCall,
    },
    /// The decision on it (a rejection fails the branch; the search goes on).
    Approval {
        /// The API's id.
        api: String,
        /// The decision.
        decision: ApprovalDecision,
    },
    /// Its response: `observation` is what the planner sees; `response` is the full body;
    /// `sent` the arguments as they went out (references resolved, types coerced to the API's
    /// schema), where the engine sent them (absent in a dry run and for a model's own calls).
    Response {
        /// The output's label (`var1`).
        label: String,
        /// The API's id.
        api: String,
        /// The HTTP status.
        status: u16,
        /// How many attempts it took.
        attempts: u32,
        /// Wall time, retries included, milliseconds.
        elapsed_ms: f64,
        /// What the planner sees of the response.
        observation: String,
        /// The full response.
        response: std::sync::Arc<Value>,
        /// The arguments as they went out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent: Option<Map<String, Value>>,
    },
    /// A call that failed (nothing was added to the path).
    CallFailed {
        /// The API's id.
        api: String,
        /// The arguments as planned (references kept).
        arguments: Map<String, Value>,
        /// Why the fragment failed, where it did.
        error: CallError,
        /// The arguments as they went out, where the call was sent and its response refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent: Option<Map<String, Value>>,
    },
    /// Reverse-Chain completion: `provider` is called first to supply `argument` of `api`.
    Insert {
        /// The API's id.
        api: String,
        /// The argument to supply.
        argument: String,
        /// The API called to supply it.
        provider: String,
    },
    /// Going back one step.
    Backtrack {
        /// The API's id.
        api: String,
        /// Why.
        reason: String,
    },
    /// A reflection round: resume from a step, or restart without some tools.
    Reflect {
        /// The round (1-based).
        round: usize,
        /// `resume` or `restart`.
        mode: String,
        /// Why.
        reason: String,
        /// The step it resumes from.
        resume_at: Option<usize>,
        /// The tools left out from now on.
        excluded_tools: Vec<String>,
    },
    /// The planner's verdict on the path.
    Judge {
        /// The verdict.
        judgement: Judgement,
    },
    /// The run needs a value only the user can give.
    NeedsInput {
        /// The API's id.
        api: String,
        /// The parameters the user must give.
        missing: Vec<String>,
    },
    /// The run finished with this answer.
    Finish {
        /// The answer.
        answer: String,
    },
    /// The run gave up.
    GiveUp {
        /// Why.
        reason: String,
    },
}

/// A call waiting for a person's approval: the API and its resolved arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The API's id.
    pub api: String,
    /// The API's name.
    pub name: String,
    /// The arguments as they would be sent.
    pub arguments: Map<String, Value>,
}

/// A person's decision on a [`PendingCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// The call may be sent.
    Approved {
        /// Who approved it.
        by: String,
    },
    /// The call is refused: the branch fails.
    Rejected {
        /// Who refused it.
        by: String,
        /// Why.
        reason: String,
    },
}
