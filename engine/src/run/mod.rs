//! A run (thesis Algorithm 4.1): recall a long-term memory or decompose the request, retrieve seed
//! tools, search the tool graph depth-first — call an API, offer its top-K successors by blended
//! weight (filled up to K from the retriever), let the planner choose next / backtrack / finish /
//! give up — reflect on failure, remember what worked, update the dynamic weights, answer.
//! Every step goes to the trace, and to a stream when one is given.
//!
//! One file per phase, in the order a run goes through them: [`recall`] (long-term memory, replay),
//! [`seeds`] (decomposition and retrieval), [`plans`] (plan mode and a person's chains),
//! [`search`] (the depth-first search), [`reverse`] (Reverse Chain), [`calls`] (sending one call),
//! [`reflect`] (judgement rounds), [`conclude`] (status, answer, memory, report); [`report`] holds
//! the types a run takes and gives. The engine asks planners only through the
//! [`Planner`](crate::plan::Planner) port; the rules every planner shares live in `plan::{fill,
//! judge, decompose, answer}`.

mod calls;
mod conclude;
pub(crate) mod health;
pub(crate) mod learn;
mod plans;
mod reflect;
pub(crate) mod report;
mod search;
mod seeds;
pub(crate) mod trace;

pub(crate) mod engine;
pub use engine::{Engine, EngineParts, MAX_ARG_EXAMPLES};

pub use calls::skeleton;
pub use report::{
    ApprovalDecision, Approver, ChainCall, NeedsInput, PendingCall, RunLearning, RunOptions, RunReport, RunStats,
    Status,
};
pub use toolgraph_schema::{Mode, RunSettings};

// The engine's front door for the rest of the system: what other crates use of a run's parts.
pub use health::{now_rfc3339, Health};
pub use trace::{ReadAs, TraceEvent};
