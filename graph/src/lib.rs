#![recursion_limit = "256"]
//! toolgraph's tool graph: the graph-store port and what goes through it, the static and dynamic
//! weight math ([`weights`]), and the stores that implement the port ([`adapters`]: embedded redb,
//! FalkorDB and Neo4j over one openCypher layer), opened from a URI by [`store::open`].
//!
//! Ingest and the engine both write through this crate; it knows nothing of retrieval, planning or
//! HTTP, so whatever needs only the graph does not compile them.
//!
//! Invariants: the port never exposes backend types (neo4rs, falkordb, redb); every backend gets
//! its weights from [`weights`], so all stores hold the same numbers for the same input.

pub mod adapters;
pub mod counts;
pub mod error;
pub mod store;
pub mod weights;
pub mod write;

pub use error::{EngineError, ErrorClass, Result};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::HashSet;
use toolgraph_schema::{
    Contribution, EdgeCountRow, FeedsRow, GraphSnapshot, GraphStats, StatusChange, Successor, WeightRow, END_ID,
    START_ID,
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

impl ApiUpsert {
    /// The store row of an API's documentation — the one builder, whatever documented it (a tool
    /// file, a registration, an OpenAPI import, an MCP server's tool list).
    pub fn from_doc(doc: &toolgraph_schema::ApiDoc) -> ApiUpsert {
        ApiUpsert {
            id: doc.id(),
            name: doc.api.clone(),
            tool: doc.tool.clone(),
            tool_id: doc.tool_id(),
            tool_description: doc.tool_description.clone(),
            category: doc.category.clone(),
            category_id: toolgraph_schema::category_id(&doc.category),
            description: doc.description.clone(),
            method: doc.method.clone(),
            url: doc.url.clone(),
            parameters: serde_json::to_string(&doc.params).unwrap_or_else(|_| "[]".into()),
            required: doc.required_params().map(|p| p.name.clone()).collect(),
            output_fields: doc.output_fields.clone(),
        }
    }
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

/// An increment of one counter of a learned model ([`counts`]): added by the store, never
/// written as a whole value, so learners in several processes all count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountDelta {
    pub key: String,
    pub n: i64,
}

/// Increments of a batch of not-yet-ingested runs, applied atomically together with marking
/// their keys as ingested, so a batch counts once or not at all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContributionBatch {
    pub keys: Vec<String>,
    pub api_counts: Vec<ApiCountDelta>,
    pub edges: Vec<EdgeDelta>,
    /// The learned models' counter increments of these runs (the argument model's), one per key.
    #[serde(default)]
    pub counts: Vec<CountDelta>,
}

/// Sum a batch's runs into increments; edges START → first, …, last → END.
pub fn aggregate(runs: &[Contribution]) -> ContributionBatch {
    let mut apis: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut edges: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for r in runs {
        for a in &r.attempts {
            let e = apis.entry(a.api_id.as_str()).or_default();
            e.0 += 1;
            e.1 += a.ok as u64;
        }
        if r.chain.is_empty() {
            continue;
        }
        let mut prev = START_ID;
        for id in &r.chain {
            *edges.entry((prev, id.as_str())).or_default() += 1;
            prev = id.as_str();
        }
        *edges.entry((prev, END_ID)).or_default() += 1;
    }
    ContributionBatch {
        keys: runs.iter().map(|r| r.key.clone()).collect(),
        api_counts: apis
            .into_iter()
            .map(|(id, (calls, successes))| ApiCountDelta { id: id.to_string(), calls, successes })
            .collect(),
        edges: edges.into_iter().map(|((f, t), n)| EdgeDelta { from: f.to_string(), to: t.to_string(), n }).collect(),
        counts: Vec::new(),
    }
}

/// Rows of a read-only Cypher query.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CypherRows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
    /// True when the row or byte limit cut the result.
    pub truncated: bool,
}

/// Limits of a read-only Cypher query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CypherLimits {
    pub max_rows: usize,
    pub timeout_ms: u64,
    /// Bytes of the result (its rows as JSON): rows past it are cut (`truncated`); a first row
    /// larger than it is an error. The servers bound the memory a query may use themselves
    /// (FalkorDB `QUERY_MEM_CAPACITY`, Neo4j `db.memory.transaction.max`: see scripts/).
    pub max_bytes: usize,
}

impl CypherLimits {
    /// The limits `[store]` sets for users' queries.
    pub fn of(s: &toolgraph_schema::StoreSettings) -> Self {
        CypherLimits { max_rows: s.query_max_rows, timeout_ms: s.query_timeout_ms, max_bytes: s.query_max_bytes }
    }
}

impl CypherRows {
    /// Add `row` to the result unless that would pass a limit: past `max_rows` rows or
    /// `max_bytes` bytes (`bytes` counts the rows so far) the result is marked truncated and
    /// `false` comes back (stop reading); a first row alone over `max_bytes` is an error.
    pub fn push_within(
        &mut self,
        row: Vec<serde_json::Value>,
        limits: CypherLimits,
        bytes: &mut usize,
    ) -> Result<bool> {
        if self.rows.len() >= limits.max_rows {
            self.truncated = true;
            return Ok(false);
        }
        // The row as JSON, and the comma that separates it from the next.
        let size = serde_json::to_vec(&row).map(|v| v.len() + 1).unwrap_or(usize::MAX);
        if bytes.saturating_add(size) > limits.max_bytes {
            if self.rows.is_empty() {
                return Err(EngineError::bad_input(format!(
                    "one row of the result is larger than the {} byte limit (store.query_max_bytes); return less per row (aggregate, LIMIT inside collect, fewer columns)",
                    limits.max_bytes
                )));
            }
            self.truncated = true;
            return Ok(false);
        }
        *bytes += size;
        self.rows.push(row);
        Ok(true)
    }
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
    /// Change an API's status (with reason, time and probe); false when no such API.
    async fn set_api_status(&self, change: &StatusChange) -> Result<bool>;
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
    /// The stored counters of learned models whose keys start with `prefix`, in key order
    /// ([`counts`]); they change only through [`GraphStore::apply_contributions`].
    async fn model_counts(&self, prefix: &str) -> Result<Vec<(String, i64)>>;
    /// A number that changes with every write that changes what [`GraphStore::snapshot`] or
    /// [`GraphStore::model_counts`] read (counts, weights, statuses, APIs), by this process or
    /// another: a daemon reloads when it moved.
    async fn generation(&self) -> Result<u64>;
    /// Read-only Cypher, where the backend speaks Cypher.
    async fn cypher_read(
        &self,
        query: &str,
        params: serde_json::Map<String, serde_json::Value>,
        limits: CypherLimits,
    ) -> Result<CypherRows>;
}
