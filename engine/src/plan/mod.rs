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

pub mod align;
pub mod analogy;
pub mod answer;
pub mod coverage;
mod dates;
pub mod decompose;
pub mod deterministic;
mod fields;
pub mod fill;
pub mod judge;
pub mod learned;
pub mod llm;
pub mod models;
mod names;
mod outputs;
pub mod program;
pub mod prompt;
pub mod reading;
pub mod replies;
mod requirement;
mod scan;
mod slots;
pub mod values;

mod planner;
pub use planner::{
    clamp_delta, run_llm_ms, ApiView, ArgSource, Candidate, Context, DeadEnd, Decision, Earlier, Filled, Judgement,
    MemoryView, ModelUsage, Offer, Planner, ProviderPick, Recollection, RunUsage, Source, Step, Subtask,
    UnsureMentions, Usage, RUN_USAGE,
};

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
