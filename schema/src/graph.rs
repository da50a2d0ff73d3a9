//! Graph records as stores hold them and the engine reads them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Lifecycle state of an API.
pub const STATUS_ACTIVE: &str = "active";
pub const STATUS_INVALID: &str = "invalid";
/// Failing lately: left out of search until a probe succeeds.
pub const STATUS_DEGRADED: &str = "degraded";

/// A change of an API's status, with why and since when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusChange {
    pub id: String,
    pub status: String,
    pub reason: String,
    /// RFC 3339 UTC.
    pub since: String,
    /// The call a probe replays to check the API again (JSON arguments); `None` keeps the one
    /// recorded before.
    pub probe: Option<String>,
}

/// An API node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiNode {
    pub id: String,
    pub name: String,
    pub tool: String,
    pub category: String,
    pub description: String,
    pub method: String,
    pub url: String,
    /// Parameter docs as JSON text (stores keep it as a string property).
    pub parameters: String,
    pub required: Vec<String>,
    pub output_fields: Vec<String>,
    pub status: String,
    pub calls: u64,
    pub successes: u64,
    /// Cumulative evaluation score s_i of the dynamic update.
    pub score: f64,
    /// Why the status is what it is, and since when (RFC 3339); empty for APIs never changed.
    #[serde(default)]
    pub status_reason: String,
    #[serde(default)]
    pub status_since: String,
    /// Arguments (JSON) of a call that worked, replayed by the health probe; empty when none.
    #[serde(default)]
    pub probe: String,
}

impl ApiNode {
    /// successes / calls, `None` before any call was seen.
    pub fn availability(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.successes as f64 / self.calls as f64)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolNode {
    pub id: String,
    pub name: String,
    pub description: String,
    pub category: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CategoryNode {
    pub id: String,
    pub name: String,
}

/// Weights of one NEXT edge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NextEdge {
    pub count: u64,
    pub static_weight: f64,
    pub dynamic_weight: f64,
}

/// One successor as search sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Successor {
    pub id: String,
    pub count: u64,
    pub static_weight: f64,
    pub dynamic_weight: f64,
}

/// Counts a store reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphStats {
    pub apis: u64,
    pub tools: u64,
    pub categories: u64,
    pub next_edges: u64,
    pub feeds_edges: u64,
    pub ingested_runs: u64,
}

/// The whole graph in memory, for search and for comparing stores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphSnapshot {
    pub apis: BTreeMap<String, ApiNode>,
    pub tools: BTreeMap<String, ToolNode>,
    pub categories: BTreeMap<String, CategoryNode>,
    /// (from, to) → weights; START and END appear as ids.
    pub next: BTreeMap<(String, String), NextEdge>,
    /// (from, to) → shared field names.
    pub feeds: BTreeMap<(String, String), Vec<String>>,
}

impl GraphSnapshot {
    /// Successors of `id` ordered by dynamic (blended) weight, best first; ties by id.
    pub fn successors(&self, id: &str, k: usize) -> Vec<Successor> {
        let mut out: Vec<Successor> = self
            .next
            .range((id.to_string(), String::new())..)
            .take_while(|((from, _), _)| from == id)
            .map(|((_, to), e)| Successor {
                id: to.clone(),
                count: e.count,
                static_weight: e.static_weight,
                dynamic_weight: e.dynamic_weight,
            })
            .collect();
        sort_successors(&mut out);
        out.truncate(k);
        out
    }
}

/// Order successors best first: dynamic weight, then static weight, then id.
pub fn sort_successors(v: &mut [Successor]) {
    v.sort_by(|a, b| {
        b.dynamic_weight
            .total_cmp(&a.dynamic_weight)
            .then(b.static_weight.total_cmp(&a.static_weight))
            .then(a.id.cmp(&b.id))
    });
}

/// One edge weight update row: (from, to, static, dynamic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightRow {
    pub from: String,
    pub to: String,
    pub static_weight: f64,
    pub dynamic_weight: f64,
}

/// A NEXT edge with what weight computation needs: its count and the target's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeCountRow {
    pub from: String,
    pub to: String,
    pub count: u64,
    pub to_score: f64,
}

/// A derived FEEDS edge (a's output fields ∩ b's input names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedsRow {
    pub from: String,
    pub to: String,
    pub fields: Vec<String>,
}
