//! The planner port: every decision of a run (decompose, choose the seed, choose next / backtrack /
//! finish, fill arguments, judge the run, aggregate the answer) goes through one trait, so the
//! search is the same whether a deterministic scorer or an LLM decides.
//!
//! Implementations: [`deterministic::DeterministicPlanner`] (graph weights × similarity ×
//! availability; the default, used by tests) and [`llm::LlmPlanner`] (any OpenAI-compatible
//! endpoint, JSON-schema constrained answers, every answer validated before anything runs).
//!
//! The rules both share have homes of their own: [`crate::fill`] (arguments), [`judge`] (usable
//! responses; what a request asks for is [`crate::read::coverage`]), [`decompose`] (rule-based
//! subtasks), [`answer`] (the answer composed from the results).

pub(crate) mod answer;
pub(crate) mod decompose;
pub(crate) mod deterministic;
pub(crate) mod judge;
pub mod llm;
pub mod models;
pub(crate) mod program;
pub(crate) mod prompt;
pub(crate) mod replies;

pub(crate) mod planner;
pub use planner::{
    clamp_delta, run_llm_ms, ApiView, ArgSource, Candidate, Condition, Context, DeadEnd, Decision, Earlier, Filled,
    Judgement, MemoryView, ModelUsage, Offer, Plan, PlanStep, Planner, ProviderPick, Recollection, RunUsage,
    SolutionView, Source, Step, Subtask, UnsureMentions, Usage, RUN_USAGE,
};

pub use decompose::subtasks_of;
pub use deterministic::DeterministicPlanner;

/// Builders the planner modules' unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{ApiView, Context};
    use crate::read::RequestValues;
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
