//! What `eval chains` reports: each method's scores, each chain's detail, the seed recall.

use serde::{Deserialize, Serialize};

/// Scores of one method.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodScores {
    pub method: String,
    pub chains: usize,
    pub call_precision: f64,
    pub call_recall: f64,
    pub call_f1: f64,
    pub edge_precision: f64,
    pub edge_recall: f64,
    pub edge_f1: f64,
    pub argument_accuracy: f64,
    pub exact_match: f64,
    pub success: f64,
    /// ComplexFuncBench's Overall Success Rate (its protocol: `complexfuncbench` module).
    #[serde(default)]
    pub overall_success_rate: f64,
    /// ComplexFuncBench's Overall Call Acc.
    #[serde(default)]
    pub overall_call_acc: f64,
    /// Gold calls some sent call matched (same API and arguments, or the same response), each
    /// gold call at most once, wherever it came in the run (API-Bank's API call correctness).
    #[serde(default)]
    pub call_correctness: f64,
    /// Runs where every gold call was matched so.
    #[serde(default)]
    pub all_calls_correct: f64,
    pub answered: usize,
    pub partial: usize,
    /// Gold successes among the runs the engine called `answered`: can `answered` be believed?
    pub answered_precision: f64,
    /// `answered` runs among the gold successes.
    pub answered_recall: f64,
    pub needs_input: usize,
    pub gave_up: usize,
    pub recalled: usize,
    pub planner_calls_mean: f64,
    pub planner_calls_p50: f64,
    /// Completions asked of an LLM per request (0 with the deterministic planner).
    #[serde(default)]
    pub llm_calls_mean: f64,
    /// Prompt tokens sent to an LLM per request.
    #[serde(default)]
    pub llm_prompt_tokens_mean: f64,
    /// Completion tokens an LLM generated per request.
    #[serde(default)]
    pub llm_completion_tokens_mean: f64,
    /// Wall seconds per request (engine, calls and LLM together).
    #[serde(default)]
    pub seconds_mean: f64,
    /// Plan mode: runs whose plan passed without falling back to the search.
    #[serde(default)]
    pub plans_completed: usize,
    pub engine_ms_p50: f64,
    pub engine_ms_p99: f64,
    pub embed_ms_p50: f64,
    /// Seed retrieval, part of engine time.
    pub retrieve_ms_p50: f64,
    pub sandbox_ms_p50: f64,
    /// API calls sent per request (every attempt the API saw, wrong ones and retries included).
    pub http_calls_mean: f64,
    /// Calls of the gold chains per request: what the calls sent are measured against.
    #[serde(default)]
    pub gold_calls_mean: f64,
}

/// One planned chain next to its gold chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChainDetail {
    pub method: String,
    pub request: String,
    pub gold: Vec<String>,
    pub planned: Vec<String>,
    pub status: String,
    pub failed_calls: u64,
    /// Score of the nearest memory, and whether it was replayed.
    pub recall: Option<(f32, bool)>,
    /// The remembered request recalled (the one replayed, or the nearest).
    #[serde(default)]
    pub recalled: Option<String>,
    /// Why a replay or the first failed call failed.
    pub first_failure: Option<String>,
    /// The benchmark's success (final gold call with the gold arguments).
    pub success: bool,
    /// What the judge found not covered.
    pub missing: String,
    /// Plan mode: where and why the plan handed over to the search (`None`: it did not, or no plan mode).
    #[serde(default)]
    pub plan_fallback: Option<String>,
    /// Plan mode: the plan's APIs.
    #[serde(default)]
    pub plan: Vec<String>,
    /// ComplexFuncBench's protocol (the `complexfuncbench` module): calls judged correct, what
    /// ended the sample or made it no success, and whether it succeeded.
    #[serde(default)]
    pub paper_correct: usize,
    #[serde(default)]
    pub paper_first_error: Option<String>,
    #[serde(default)]
    pub paper_success: bool,
    /// Planner decisions the run took.
    #[serde(default)]
    pub planner_calls: u64,
    /// Every call sent, in order (the protocol's names), and the APIs the request's words asked
    /// for (the judge's API requirements).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked: Vec<String>,
    /// The fragments composed beyond a replayed memory: `API` where one served, `API: why not`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub composed: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChainReport {
    pub train_chains: usize,
    pub test_chains: usize,
    pub folds: usize,
    /// How held-out chains were drawn: `chains` (every k-th) or `families` (whole kinds).
    #[serde(default)]
    pub split: String,
    /// Held-out chains skipped because they call an API their fold never learned (families).
    #[serde(default)]
    pub skipped_held_out: usize,
    pub skipped: Vec<String>,
    pub methods: Vec<MethodScores>,
    pub seconds: f64,
    /// Every test chain of every method (written to the JSON report).
    pub details: Vec<ChainDetail>,
    /// Seed retrieval of the held-out requests' gold APIs: plain hybrid vs hybrid with the usage
    /// vectors the training chains built, in one run on the same folds.
    pub seed_recall: Vec<SeedRecall>,
}

/// Recall of the gold chain's APIs among the top-k seeds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeedRecall {
    pub retrieval: String,
    pub usage_weight: f32,
    pub requests: usize,
    pub recall_at_3: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
}
