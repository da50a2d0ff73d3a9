//! Trajectories: recorded runs of tool calls for a request, in toolgraph's own format.
//!
//! This is the documented JSONL format users feed their own logs in (one run per line):
//! ```json
//! {"request": "weather in Paris tomorrow",
//!  "calls": [{"tool": "Weather", "api": "forecast", "category": "Weather",
//!             "arguments": {"city": "Paris"}, "status": "ok", "response": {"temp": 12}}],
//!  "outcome": "answered", "answer": "12°C"}
//! ```
//! `category` is optional when the tool docs name it; `status` is `ok` or `error` (with `error`);
//! `outcome` is `answered`, `gave_up` or `failed`. Only answered runs feed the graph's chains, but
//! every call of every run counts towards API availability.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    #[default]
    Ok,
    Error,
}

/// One call as written in the JSONL format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    pub tool: String,
    pub api: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default)]
    pub arguments: serde_json::Value,
    #[serde(default)]
    pub status: CallStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<serde_json::Value>,
    /// Name under which later calls refer to this call's output (`$label.field$`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Answered,
    GaveUp,
    Failed,
}

/// One run in the JSONL format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedRun {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub request: String,
    pub calls: Vec<RecordedCall>,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// A call resolved to a catalogued API, as the graph consumes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedCall {
    pub api_id: String,
    pub ok: bool,
}

/// What one input record contributes to the graph. `key` identifies the record by content, so
/// the same record ingested twice contributes once.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contribution {
    pub key: String,
    /// Every attempted call (successful or not) on any branch, for availability.
    pub attempts: Vec<ResolvedCall>,
    /// The kept chain (successful calls of an answered path, in order); empty for dropped runs.
    pub chain: Vec<String>,
    /// The request and the kept chain's calls with their arguments and responses, when the record
    /// holds them: an example of where argument values come from, for the argument model.
    pub example: Option<Example>,
}

/// A request and the successful calls of its answered path, as recorded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Example {
    pub request: String,
    pub calls: Vec<ExampleCall>,
}

/// One call of an [`Example`]: the API it resolved to, the label later calls refer to it by
/// (when the record names one), the arguments as sent and the response (when recorded).
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleCall {
    pub api_id: String,
    pub label: Option<String>,
    pub arguments: serde_json::Map<String, serde_json::Value>,
    pub response: Option<serde_json::Value>,
}
