//! The planner port: every decision of a run (decompose, choose the seed, choose next / backtrack /
//! finish, fill arguments, judge the run, aggregate the answer) goes through one trait, so the
//! search is the same whether a deterministic scorer or an LLM decides.
//!
//! Implementations: [`deterministic::DeterministicPlanner`] (graph weights × similarity ×
//! availability; the default, used by tests) and [`llm::LlmPlanner`] (any OpenAI-compatible
//! endpoint, JSON-schema constrained answers, every answer validated before anything runs).
//!
//! The rules both share — and the engine uses to tell what is possible without asking a planner —
//! have homes of their own: [`fill`] (arguments from earlier outputs, then typed request values,
//! then earlier turns, then schema defaults), [`judge`] (usable responses and coverage),
//! [`decompose`] (rule-based subtasks), [`answer`] (the answer composed from the results).

pub(crate) mod align;
pub(crate) mod analogy;
pub(crate) mod answer;
pub(crate) mod asks;
pub(crate) mod coverage;
mod dates;
pub(crate) mod decompose;
pub(crate) mod deterministic;
mod fields;
pub(crate) mod fill;
pub(crate) mod judge;
pub(crate) mod learned;
mod lists;
pub mod llm;
pub mod models;
pub(crate) mod moments;
mod names;
mod outputs;
pub(crate) mod program;
pub(crate) mod prompt;
pub(crate) mod reading;
pub(crate) mod replies;
mod requirement;
mod scan;
mod slots;
pub(crate) mod spans;
pub(crate) mod values;

mod planner;
pub use planner::{
    clamp_delta, run_llm_ms, ApiView, ArgSource, Candidate, Condition, Context, DeadEnd, Decision, Earlier, Filled,
    Judgement, MemoryView, ModelUsage, Offer, Plan, PlanStep, Planner, ProviderPick, Recollection, RunUsage,
    SolutionView, Source, Step, Subtask, UnsureMentions, Usage, RUN_USAGE,
};

// The planner's front door for the rest of the system: what other crates use of its parts.
pub use asks::Asks;
pub use decompose::subtasks_of;
pub use deterministic::DeterministicPlanner;
pub use learned::{mentions, ArgModel, Kind as MentionKind};
pub use reading::meaning_text;
pub use requirement::{missing_text, Kind as RequirementKind, Requirement};
pub use values::{is_end_param, RequestValues};

/// Builders the planner modules' unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::values::RequestValues;
    use super::{ApiView, Context};
    use chrono::NaiveDate;
    use std::sync::Arc;
    use toolgraph_schema::ParamDoc;

    pub(crate) fn p(name: &str, ty: &str, required: bool) -> ParamDoc {
        ParamDoc { name: name.into(), ty: ty.into(), description: String::new(), required, default: None }
    }

    pub(crate) fn api(id: &str, params: Vec<ParamDoc>) -> Arc<ApiView> {
        Arc::new(ApiView {
            id: id.into(),
            name: id.into(),
            tool: "t".into(),
            category: "c".into(),
            description: String::new(),
            params,
            output_fields: vec![],
            availability: None,
            ends: None,
        })
    }

    /// A context for `text` with 2030-01-01 as today.
    pub(crate) fn ctx(text: &str) -> Context {
        Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()))
    }
}
