//! The ingest report: what was read, kept, dropped (by reason) and written.

use crate::error::RecordError;
use serde::Serialize;
use std::collections::BTreeMap;

/// Why a run was not used for chains.
pub mod run_drop {
    pub const PARSE_ERROR: &str = "parse_error";
    pub const TOO_LARGE: &str = "too_large";
    pub const EMPTY: &str = "empty_record";
    pub const NOT_ANSWERED: &str = "not_answered";
    pub const GAVE_UP: &str = "gave_up";
    pub const NO_SUCCESSFUL_CALLS: &str = "no_successful_calls";
}

/// Why a call of an answered path was not kept.
pub mod call_drop {
    pub const ON_DROPPED_RUN: &str = "on_dropped_run";
    pub const UNKNOWN_FUNCTION: &str = "unknown_function";
    pub const AMBIGUOUS_FUNCTION: &str = "ambiguous_function";
    pub const ERROR_MESSAGE: &str = "error_message";
    pub const FAILED: &str = "failed";

    /// ToolBench `observation_code` → reason (codes 3 and 4 are Finish, never API calls).
    pub fn for_code(code: i64) -> &'static str {
        match code {
            1 => "code_1_hallucinated_name",
            2 => "code_2_bad_finish_arguments",
            5 => "code_5_timeout",
            6 => "code_6_not_found",
            7 => "code_7_unauthorized",
            8 => "code_8_unsubscribed",
            9 => "code_9_too_many_requests",
            10 => "code_10_rate_limited",
            11 => "code_11_message_error",
            12 => "code_12_request_error",
            _ => "code_other",
        }
    }
}

/// Counters of one ingest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub runs_read: u64,
    pub runs_kept: u64,
    pub runs_already_ingested: u64,
    pub runs_dropped: BTreeMap<String, u64>,
    pub calls_kept: u64,
    pub calls_dropped: BTreeMap<String, u64>,
    /// Attempted calls (any branch) counted towards availability.
    pub attempts_counted: u64,
    /// Attempted calls whose name matched no API (not counted).
    pub attempts_unresolved: u64,
}

impl Tally {
    pub fn drop_run(&mut self, reason: &str) {
        *self.runs_dropped.entry(reason.to_string()).or_default() += 1;
    }
    pub fn drop_calls(&mut self, reason: &str, n: u64) {
        if n > 0 {
            *self.calls_dropped.entry(reason.to_string()).or_default() += n;
        }
    }
    pub fn runs_dropped_total(&self) -> u64 {
        self.runs_dropped.values().sum()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeCounts {
    pub apis: u64,
    pub tools: u64,
    pub categories: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EdgeCounts {
    pub next: u64,
    pub feeds: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IngestReport {
    pub store: String,
    /// True when the ingest was stopped early (Ctrl-C): what was read before is fully written.
    pub interrupted: bool,
    pub files_read: u64,
    pub doc_records_read: u64,
    pub apis_from_docs: u64,
    pub apis_written: u64,
    #[serde(flatten)]
    pub tally: Tally,
    /// Graph totals after the ingest.
    pub nodes: NodeCounts,
    pub edges: EdgeCounts,
    pub weights_recomputed: u64,
    pub feeds_written: u64,
    /// Answered runs the argument model learned from (their requests and call arguments), when
    /// the ingest trained one (`toolgraph ingest` does; it is stored with the graph).
    pub arg_examples: u64,
    /// Answered runs remembered in the long-term memory (request → chain, recalled for like
    /// requests), when the ingest teaches one (`toolgraph ingest` does).
    #[serde(default)]
    pub memories: u64,
    pub elapsed_s: f64,
    pub runs_per_s: f64,
    pub errors_total: u64,
    /// The first errors (all are counted in `errors_total`).
    pub errors: Vec<RecordError>,
}
