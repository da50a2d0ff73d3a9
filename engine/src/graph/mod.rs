//! The graph-store port and what goes through it.

pub mod weights;

use crate::Result;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use toolgraph_schema::{
    EdgeCountRow, FeedsRow, GraphSnapshot, GraphStats, Successor, WeightRow,
};

/// An API as written to a store: its documentation; counters and status are the store's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiUpsert {
    pub id: String,
    pub name: String,
    pub tool: String,
    pub tool_id: String,
    pub tool_description: String,
    pub category: String,
    pub category_id: String,
    pub description: String,
    pub method: String,
    pub url: String,
    pub parameters: String,
    pub required: Vec<String>,
    pub output_fields: Vec<String>,
}

/// Per-API call counter increments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiCountDelta {
    pub id: String,
    pub calls: u64,
    pub successes: u64,
}

/// NEXT edge count increment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeDelta {
    pub from: String,
    pub to: String,
    pub n: u64,
}

/// Increments of a batch of not-yet-ingested runs, applied atomically together with marking
/// their keys as ingested, so a batch counts once or not at all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContributionBatch {
    pub keys: Vec<String>,
    pub api_counts: Vec<ApiCountDelta>,
    pub edges: Vec<EdgeDelta>,
}

/// Rows of a read-only Cypher query.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CypherRows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
    /// True when the row limit cut the result.
    pub truncated: bool,
}

/// Limits of a read-only Cypher query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CypherLimits {
    pub max_rows: usize,
    pub timeout_ms: u64,
}

/// A tool-graph store. Implementations: embedded (redb), FalkorDB and Neo4j (one shared Cypher layer).
///
/// Writes are idempotent: upserts set absolute values, and count increments arrive only through
/// [`GraphStore::apply_contributions`], which records the runs' keys in the same atomic write.
#[async_trait]
pub trait GraphStore: Send + Sync {
    /// Backend name for messages (`embedded`, `falkordb`, `neo4j`).
    fn backend(&self) -> &'static str;
    /// Create constraints/indexes and the START/END nodes. Safe to call again.
    async fn setup(&self) -> Result<()>;
    /// Insert or update API, tool and category nodes and BELONGS_TO edges. Counters, score and
    /// status of existing APIs are kept.
    async fn upsert_apis(&self, apis: &[ApiUpsert]) -> Result<()>;
    /// Which of `keys` were already ingested.
    async fn ingested_keys(&self, keys: &[String]) -> Result<HashSet<String>>;
    /// Apply a batch of new runs' increments and record their keys, atomically.
    async fn apply_contributions(&self, batch: &ContributionBatch) -> Result<()>;
    /// NEXT edges leaving `sources` (all edges when `None`) with counts and target scores.
    async fn edge_counts(&self, sources: Option<&[String]>) -> Result<Vec<EdgeCountRow>>;
    /// Nodes with a NEXT edge into any of `targets`.
    async fn predecessors(&self, targets: &[String]) -> Result<Vec<String>>;
    /// Set static and dynamic weights of existing NEXT edges.
    async fn set_weights(&self, rows: &[WeightRow]) -> Result<()>;
    /// Add evaluation score deltas to APIs' cumulative scores (s_i += Δ_i).
    async fn add_scores(&self, deltas: &[(String, f64)]) -> Result<()>;
    /// Insert or update derived FEEDS edges.
    async fn upsert_feeds(&self, rows: &[FeedsRow]) -> Result<()>;
    /// Change an API's status; false when no such API.
    async fn set_api_status(&self, id: &str, status: &str) -> Result<bool>;
    /// Top-`k` successors of `id` by blended (dynamic) weight; invalid APIs are left out.
    async fn successors(&self, id: &str, k: usize) -> Result<Vec<Successor>>;
    /// The whole graph, for in-memory search and comparisons.
    async fn snapshot(&self) -> Result<GraphSnapshot>;
    /// API, tool and category nodes only (no edges): what an ingest needs to resolve names.
    async fn node_snapshot(&self) -> Result<GraphSnapshot>;
    async fn stats(&self) -> Result<GraphStats>;
    /// One cheap round trip to the backend: is it reachable now? (Embedded: always.)
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
    /// A marker that derived weights may be stale (set before writing counts, cleared after).
    async fn set_weights_dirty(&self, dirty: bool) -> Result<()>;
    async fn weights_dirty(&self) -> Result<bool>;
    /// Read-only Cypher, where the backend speaks Cypher.
    async fn cypher_read(
        &self,
        query: &str,
        params: serde_json::Map<String, serde_json::Value>,
        limits: CypherLimits,
    ) -> Result<CypherRows>;
}
