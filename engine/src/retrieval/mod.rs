//! Seed-tool retrieval: what text stands for an API, lexical (BM25) and dense (embedding) search,
//! their fusion, and the metrics that measure them.

pub mod bm25;
pub mod cache;
pub mod exact;
pub mod fusion;
pub mod hybrid;
pub mod index;
pub mod metrics;
pub mod usage;

use serde::{Deserialize, Serialize};

/// One searchable API: its id, the text that represents it, and the fields filters use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiText {
    /// The API's id.
    pub id: String,
    /// Its name, description and parameters, as indexed.
    pub text: String,
    /// Its category.
    pub category: String,
    /// Its tool.
    pub tool: String,
    /// Its status (`active`, `degraded`…).
    pub status: String,
}

/// The text that stands for an API: tool name + tool description + API name + API description +
/// parameter names.
pub fn api_text(tool: &str, tool_description: &str, api: &str, api_description: &str, params: &[&str]) -> String {
    let clip = |s: &str, n: usize| -> String { s.chars().take(n).collect() };
    let mut t = format!("{tool}. {}. {api}. {}", clip(tool_description, 300), clip(api_description, 500));
    if !params.is_empty() {
        t.push_str(". parameters: ");
        t.push_str(&params.join(", "));
    }
    t
}

/// A search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The API's id.
    pub id: String,
    /// Its score (higher is nearer).
    pub score: f32,
}

/// Restricts a search to APIs of a category / tool, and to a status (active by default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Filter {
    /// Only APIs of this category.
    pub category: Option<String>,
    /// Only APIs of this tool.
    pub tool: Option<String>,
    /// Only APIs with this status.
    pub status: Option<String>,
}

impl Filter {
    /// Whether `doc` passes the filter.
    pub fn accepts(&self, doc: &ApiText) -> bool {
        self.category.as_ref().is_none_or(|c| *c == doc.category)
            && self.tool.as_ref().is_none_or(|t| *t == doc.tool)
            && self.status.as_ref().is_none_or(|s| *s == doc.status)
    }
}
