//! The openCypher query layer shared by the Neo4j and FalkorDB adapters.
//!
//! Every statement is written here once, in openCypher that both Neo4j 5 and FalkorDB accept,
//! with parameters only (never user text spliced into a query). A backend supplies a
//! [`CypherRunner`] — how to send a statement and read rows back — and [`CypherStore`] implements
//! the [`GraphStore`] port on top of it.
//!
//! Data model: `(:Api:Step {id})`, `(:Start:Step {id:'START'})`, `(:End:Step {id:'END'})`,
//! `(:Tool {id})`, `(:Category {id})`; `(:Step)-[:NEXT {count, static_weight, dynamic_weight}]->(:Step)`,
//! `(:Api)-[:BELONGS_TO]->(:Tool)-[:BELONGS_TO]->(:Category)`, `(:Api)-[:FEEDS {fields, derived}]->(:Api)`;
//! `(:IngestedRun {key})` records ingested runs, `(:Meta {id})` holds flags.
//!
//! Dialect differences, isolated in [`Dialect`]:
//! - schema: Neo4j 5 gets uniqueness constraints (`CREATE CONSTRAINT … IF NOT EXISTS`), FalkorDB
//!   gets range indexes (`CREATE INDEX FOR (n:L) ON (n.p)`, which errors when the index exists);
//! - read-only user queries: FalkorDB runs them with `GRAPH.RO_QUERY`, Neo4j in a READ access-mode
//!   transaction with a server-side timeout; on both the server refuses writes.

use crate::{ApiUpsert, ContributionBatch, CypherLimits, CypherRows, GraphStore};
use crate::{EngineError, Result};
use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use toolgraph_schema::{
    ApiNode, CategoryNode, EdgeCountRow, FeedsRow, GraphSnapshot, GraphStats, NextEdge, StatusChange, Successor,
    ToolNode, WeightRow, END_ID, START_ID,
};

/// Which server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Neo4j,
    FalkorDb,
}

/// One parameterized statement and the columns it returns, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    pub text: &'static str,
    pub params: Map<String, Value>,
    pub columns: &'static [&'static str],
}

impl Stmt {
    /// A short name for logs: the statement's first clause line.
    pub fn op(&self) -> &'static str {
        self.text.lines().find(|l| !l.trim_start().starts_with("UNWIND")).unwrap_or(self.text)
    }
    fn new(text: &'static str, columns: &'static [&'static str]) -> Self {
        Stmt { text, params: Map::new(), columns }
    }
    fn param(mut self, name: &str, value: Value) -> Self {
        self.params.insert(name.to_string(), value);
        self
    }
}

/// What a backend must provide for [`CypherStore`].
#[async_trait]
pub trait CypherRunner: Send + Sync {
    fn backend(&self) -> &'static str;
    fn dialect(&self) -> Dialect;
    /// Run a write statement atomically.
    async fn write(&self, stmt: &Stmt) -> Result<()>;
    /// Run a read statement; each row holds `stmt.columns` in order.
    async fn read(&self, stmt: &Stmt) -> Result<Vec<Vec<Value>>>;
    /// Run a schema statement; `Ok(false)` when it failed only because the object already exists.
    async fn schema(&self, text: &str) -> Result<bool>;
    /// One cheap round trip.
    async fn ping(&self) -> Result<()>;
    /// A user's query, guaranteed not to change the graph, within limits. `slot` is held until
    /// the server has finished the query.
    async fn read_only(
        &self,
        query: &str,
        params: Map<String, Value>,
        limits: CypherLimits,
        slot: OwnedSemaphorePermit,
    ) -> Result<CypherRows>;
}

// ---- statements ---------------------------------------------------------------------------------

const LABEL_KEYS: &[(&str, &str)] =
    &[("Step", "id"), ("Api", "id"), ("Tool", "id"), ("Category", "id"), ("IngestedRun", "key"), ("Meta", "id")];

/// Schema statements for a dialect.
pub fn setup_statements(dialect: Dialect) -> Vec<String> {
    LABEL_KEYS
        .iter()
        .map(|(label, key)| match dialect {
            Dialect::Neo4j => format!(
                "CREATE CONSTRAINT {}_{key} IF NOT EXISTS FOR (n:{label}) REQUIRE n.{key} IS UNIQUE",
                label.to_lowercase()
            ),
            Dialect::FalkorDb => format!("CREATE INDEX FOR (n:{label}) ON (n.{key})"),
        })
        .collect()
}

pub const TERMINALS: &str = "MERGE (s:Start:Step {id: $start}) MERGE (e:End:Step {id: $end})";

/// Categories and tools first, one row per tool (not per API: a tool's MERGEs and SETs ran once
/// per API of it before, which made the doc ingest 3x slower on Neo4j than on FalkorDB).
pub const UPSERT_TOOLS: &str = "\
UNWIND $rows AS r
MERGE (c:Category {id: r.category_id})
SET c.name = r.category
MERGE (t:Tool {id: r.tool_id})
SET t.name = r.tool, t.description = r.tool_description, t.category = r.category_id
MERGE (t)-[:BELONGS_TO]->(c)";

/// Then the APIs, each attached to its (existing) tool.
pub const UPSERT_APIS: &str = "\
UNWIND $rows AS r
MATCH (t:Tool {id: r.tool_id})
MERGE (a:Api:Step {id: r.id})
ON CREATE SET a.status = 'active', a.calls = 0, a.successes = 0, a.score = 0.0
SET a.name = r.name, a.tool = r.tool_id, a.category = r.category_id, a.description = r.description,
    a.method = r.method, a.url = r.url, a.parameters = r.parameters, a.required = r.required,
    a.output_fields = r.output_fields
MERGE (a)-[:BELONGS_TO]->(t)";

pub const INGESTED_KEYS: &str = "\
UNWIND $keys AS k
MATCH (l:IngestedRun {key: k})
RETURN l.key AS key";

/// Counts, edges and ledger keys in one statement, so a batch is applied once or not at all.
/// `WITH count(*)` after each UNWIND collapses the rows back to one, also when a list is empty.
pub const APPLY_CONTRIBUTIONS: &str = "\
UNWIND $apis AS c
MATCH (a:Api {id: c.id})
SET a.calls = a.calls + c.calls, a.successes = a.successes + c.successes
WITH count(*) AS apis_done
UNWIND $edges AS e
MATCH (x:Step {id: e.from}), (y:Step {id: e.to})
MERGE (x)-[r:NEXT]->(y)
ON CREATE SET r.count = 0, r.static_weight = 0.0, r.dynamic_weight = 0.0
SET r.count = r.count + e.n
WITH count(*) AS edges_done
UNWIND $keys AS k
MERGE (:IngestedRun {key: k})";

pub const EDGE_COUNTS_OF: &str = "\
UNWIND $ids AS id
MATCH (a:Step {id: id})-[r:NEXT]->(b:Step)
RETURN a.id AS from, b.id AS to, r.count AS count, coalesce(b.score, 0.0) AS score";

pub const EDGE_COUNTS_ALL: &str = "\
MATCH (a:Step)-[r:NEXT]->(b:Step)
RETURN a.id AS from, b.id AS to, r.count AS count, coalesce(b.score, 0.0) AS score";

const EDGE_COUNT_COLUMNS: &[&str] = &["from", "to", "count", "score"];

pub const PREDECESSORS: &str = "\
UNWIND $ids AS id
MATCH (a:Step)-[:NEXT]->(b:Step {id: id})
RETURN DISTINCT a.id AS id";

/// Both ends are bound before the edge is matched, so the edge is found by an expand-into lookup
/// rather than by walking every edge of the source (START has tens of thousands).
pub const SET_WEIGHTS: &str = "\
UNWIND $rows AS w
MATCH (a:Step {id: w.from})
MATCH (b:Step {id: w.to})
WITH a, b, w
MATCH (a)-[r:NEXT]->(b)
SET r.static_weight = w.static_weight, r.dynamic_weight = w.dynamic_weight";

pub const ADD_SCORES: &str = "\
UNWIND $rows AS d
MATCH (a:Api {id: d.id})
SET a.score = a.score + d.delta";

pub const UPSERT_FEEDS: &str = "\
UNWIND $rows AS f
MATCH (a:Api {id: f.from}), (b:Api {id: f.to})
MERGE (a)-[r:FEEDS]->(b)
SET r.fields = f.fields, r.derived = true";

pub const SET_STATUS: &str = "\
MATCH (a:Api {id: $id})
SET a.status = $status, a.status_reason = $reason, a.status_since = $since,
    a.probe = coalesce($probe, a.probe, '')
RETURN a.id AS id";

pub const SUCCESSORS: &str = "\
MATCH (a:Step {id: $id})-[r:NEXT]->(b:Step)
WHERE coalesce(b.status, 'active') <> 'invalid'
RETURN b.id AS id, r.count AS count, r.static_weight AS static_weight, r.dynamic_weight AS dynamic_weight
ORDER BY dynamic_weight DESC, static_weight DESC, id ASC
LIMIT $k";

pub const ALL_APIS: &str = "\
MATCH (a:Api)
RETURN a.id AS id, a.name AS name, a.tool AS tool, a.category AS category, a.description AS description,
       a.method AS method, a.url AS url, a.parameters AS parameters, a.required AS required,
       a.output_fields AS output_fields, a.status AS status, a.calls AS calls, a.successes AS successes,
       a.score AS score, a.status_reason AS status_reason, a.status_since AS status_since, a.probe AS probe";
const API_COLUMNS: &[&str] = &[
    "id",
    "name",
    "tool",
    "category",
    "description",
    "method",
    "url",
    "parameters",
    "required",
    "output_fields",
    "status",
    "calls",
    "successes",
    "score",
    "status_reason",
    "status_since",
    "probe",
];

pub const ALL_TOOLS: &str =
    "MATCH (t:Tool) RETURN t.id AS id, t.name AS name, t.description AS description, t.category AS category";
pub const ALL_CATEGORIES: &str = "MATCH (c:Category) RETURN c.id AS id, c.name AS name";
pub const ALL_NEXT: &str = "\
MATCH (a:Step)-[r:NEXT]->(b:Step)
RETURN a.id AS from, b.id AS to, r.count AS count, r.static_weight AS static_weight, r.dynamic_weight AS dynamic_weight";
pub const ALL_FEEDS: &str = "MATCH (a:Api)-[r:FEEDS]->(b:Api) RETURN a.id AS from, b.id AS to, r.fields AS fields";

pub const COUNT_APIS: &str = "MATCH (n:Api) RETURN count(n) AS n";
pub const COUNT_TOOLS: &str = "MATCH (n:Tool) RETURN count(n) AS n";
pub const COUNT_CATEGORIES: &str = "MATCH (n:Category) RETURN count(n) AS n";
pub const COUNT_NEXT: &str = "MATCH (:Step)-[r:NEXT]->(:Step) RETURN count(r) AS n";
pub const COUNT_FEEDS: &str = "MATCH (:Api)-[r:FEEDS]->(:Api) RETURN count(r) AS n";
pub const COUNT_RUNS: &str = "MATCH (n:IngestedRun) RETURN count(n) AS n";

pub const SET_META: &str = "MERGE (m:Meta {id: $id}) SET m.value = $value";
pub const GET_META: &str = "MATCH (m:Meta {id: $id}) RETURN m.value AS value";
/// Model parts are `(:Meta)` nodes whose id is `model:<key>`.
pub const SET_MODEL_PARTS: &str = "UNWIND $rows AS row MERGE (m:Meta {id: 'model:' + row.key}) SET m.value = row.value";
pub const MODEL_PARTS: &str = "MATCH (m:Meta) WHERE m.id STARTS WITH ('model:' + $prefix) RETURN substring(m.id, 6) AS key, m.value AS value ORDER BY key";
/// Model parts per write (each a few kilobytes of JSON).
const MODEL_PARTS_PER_WRITE: usize = 500;

/// Statement builders: the parameter rows each statement expects.
pub mod build {
    use super::*;

    /// One row per tool of `rows`, in the order of each tool's last API, so that the last write
    /// of a tool's and a category's names is the same one a per-API upsert would make.
    pub fn upsert_tools(rows: &[ApiUpsert]) -> Stmt {
        let mut last: std::collections::HashMap<&str, usize> = Default::default();
        for (i, a) in rows.iter().enumerate() {
            last.insert(a.tool_id.as_str(), i);
        }
        let mut order: Vec<usize> = last.into_values().collect();
        order.sort_unstable();
        let tools: Vec<Value> = order
            .into_iter()
            .map(|i| {
                let a = &rows[i];
                json!({
                    "tool": a.tool, "tool_id": a.tool_id, "tool_description": a.tool_description,
                    "category": a.category, "category_id": a.category_id,
                })
            })
            .collect();
        Stmt::new(UPSERT_TOOLS, &[]).param("rows", Value::Array(tools))
    }

    pub fn upsert_apis(rows: &[ApiUpsert]) -> Stmt {
        let rows: Vec<Value> = rows
            .iter()
            .map(|a| {
                json!({
                    "id": a.id, "name": a.name, "tool_id": a.tool_id, "category_id": a.category_id,
                    "description": a.description, "method": a.method, "url": a.url,
                    "parameters": a.parameters, "required": a.required, "output_fields": a.output_fields,
                })
            })
            .collect();
        Stmt::new(UPSERT_APIS, &[]).param("rows", Value::Array(rows))
    }

    pub fn ingested_keys(keys: &[String]) -> Stmt {
        Stmt::new(INGESTED_KEYS, &["key"]).param("keys", json!(keys))
    }

    pub fn apply(batch: &ContributionBatch) -> Stmt {
        let apis: Vec<Value> =
            batch.api_counts.iter().map(|c| json!({"id": c.id, "calls": c.calls, "successes": c.successes})).collect();
        let edges: Vec<Value> = batch.edges.iter().map(|e| json!({"from": e.from, "to": e.to, "n": e.n})).collect();
        Stmt::new(APPLY_CONTRIBUTIONS, &[])
            .param("apis", Value::Array(apis))
            .param("edges", Value::Array(edges))
            .param("keys", json!(batch.keys))
    }

    pub fn edge_counts(sources: Option<&[String]>) -> Stmt {
        match sources {
            Some(ids) => Stmt::new(EDGE_COUNTS_OF, EDGE_COUNT_COLUMNS).param("ids", json!(ids)),
            None => Stmt::new(EDGE_COUNTS_ALL, EDGE_COUNT_COLUMNS),
        }
    }

    pub fn predecessors(ids: &[String]) -> Stmt {
        Stmt::new(PREDECESSORS, &["id"]).param("ids", json!(ids))
    }

    pub fn set_weights(rows: &[WeightRow]) -> Stmt {
        Stmt::new(SET_WEIGHTS, &[]).param("rows", serde_json::to_value(rows).unwrap_or_default())
    }

    pub fn add_scores(deltas: &[(String, f64)]) -> Stmt {
        let rows: Vec<Value> = deltas.iter().map(|(id, d)| json!({"id": id, "delta": d})).collect();
        Stmt::new(ADD_SCORES, &[]).param("rows", Value::Array(rows))
    }

    pub fn upsert_feeds(rows: &[FeedsRow]) -> Stmt {
        Stmt::new(UPSERT_FEEDS, &[]).param("rows", serde_json::to_value(rows).unwrap_or_default())
    }

    pub fn set_status(c: &StatusChange) -> Stmt {
        Stmt::new(SET_STATUS, &["id"])
            .param("id", json!(c.id))
            .param("status", json!(c.status))
            .param("reason", json!(c.reason))
            .param("since", json!(c.since))
            .param("probe", json!(c.probe))
    }

    pub fn successors(id: &str, k: usize) -> Stmt {
        Stmt::new(SUCCESSORS, &["id", "count", "static_weight", "dynamic_weight"])
            .param("id", json!(id))
            .param("k", json!(k))
    }

    pub fn terminals() -> Stmt {
        Stmt::new(TERMINALS, &[]).param("start", json!(START_ID)).param("end", json!(END_ID))
    }

    pub fn set_meta(id: &str, value: &str) -> Stmt {
        Stmt::new(SET_META, &[]).param("id", json!(id)).param("value", json!(value))
    }

    pub fn get_meta(id: &str) -> Stmt {
        Stmt::new(GET_META, &["value"]).param("id", json!(id))
    }

    pub fn set_model_parts(parts: &[(String, String)]) -> Stmt {
        let rows: Vec<Value> = parts.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
        Stmt::new(SET_MODEL_PARTS, &[]).param("rows", Value::Array(rows))
    }

    pub fn model_parts(prefix: &str) -> Stmt {
        Stmt::new(MODEL_PARTS, &["key", "value"]).param("prefix", json!(prefix))
    }
}

// ---- reading values back ------------------------------------------------------------------------

fn as_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn as_u64(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)).unwrap_or(0),
        Value::String(s) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => s.parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn as_strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(as_str).collect(),
        _ => Vec::new(),
    }
}

// ---- the store ----------------------------------------------------------------------------------

/// A [`GraphStore`] over any Cypher server.
pub struct CypherStore<R> {
    runner: R,
    batch_rows: usize,
    /// Users' read-only queries that may run at once (`store.query_max_running`); a runner holds
    /// its slot until the server has finished the query, past the caller's time limit if need be.
    queries: Arc<Semaphore>,
}

impl<R: CypherRunner> CypherStore<R> {
    pub fn new(runner: R, batch_rows: usize) -> Self {
        CypherStore { runner, batch_rows: batch_rows.max(1), queries: Arc::new(Semaphore::new(1)) }
    }
    /// At most `n` users' queries at once (at least one).
    pub fn with_query_slots(mut self, n: usize) -> Self {
        self.queries = Arc::new(Semaphore::new(n.max(1)));
        self
    }
    pub fn runner(&self) -> &R {
        &self.runner
    }
    async fn count(&self, text: &'static str) -> Result<u64> {
        let rows = self.runner.read(&Stmt::new(text, &["n"])).await?;
        Ok(rows.first().and_then(|r| r.first()).map(as_u64).unwrap_or(0))
    }
}

#[async_trait]
impl<R: CypherRunner> GraphStore for CypherStore<R> {
    fn backend(&self) -> &'static str {
        self.runner.backend()
    }

    async fn setup(&self) -> Result<()> {
        for s in setup_statements(self.runner.dialect()) {
            self.runner.schema(&s).await?;
        }
        self.runner.write(&build::terminals()).await
    }

    async fn upsert_apis(&self, apis: &[ApiUpsert]) -> Result<()> {
        for part in apis.chunks(self.batch_rows) {
            self.runner.write(&build::upsert_tools(part)).await?;
            self.runner.write(&build::upsert_apis(part)).await?;
        }
        Ok(())
    }

    async fn ingested_keys(&self, keys: &[String]) -> Result<HashSet<String>> {
        let mut seen = HashSet::new();
        for part in keys.chunks(self.batch_rows.max(1000)) {
            for row in self.runner.read(&build::ingested_keys(part)).await? {
                if let Some(v) = row.first() {
                    seen.insert(as_str(v));
                }
            }
        }
        Ok(seen)
    }

    async fn apply_contributions(&self, batch: &ContributionBatch) -> Result<()> {
        // One statement: FalkorDB has no multi-statement transactions, and a single query is atomic.
        self.runner.write(&build::apply(batch)).await
    }

    async fn edge_counts(&self, sources: Option<&[String]>) -> Result<Vec<EdgeCountRow>> {
        let rows = self.runner.read(&build::edge_counts(sources)).await?;
        Ok(rows
            .iter()
            .map(|r| EdgeCountRow {
                from: as_str(&r[0]),
                to: as_str(&r[1]),
                count: as_u64(&r[2]),
                to_score: as_f64(&r[3]),
            })
            .collect())
    }

    async fn predecessors(&self, targets: &[String]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for part in targets.chunks(self.batch_rows) {
            out.extend(self.runner.read(&build::predecessors(part)).await?.iter().map(|r| as_str(&r[0])));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn set_weights(&self, rows: &[WeightRow]) -> Result<()> {
        for part in rows.chunks(self.batch_rows) {
            self.runner.write(&build::set_weights(part)).await?;
        }
        Ok(())
    }

    async fn add_scores(&self, deltas: &[(String, f64)]) -> Result<()> {
        // Sum repeated ids first: one SET per node per statement.
        let mut summed: std::collections::BTreeMap<&str, f64> = Default::default();
        for (id, d) in deltas {
            *summed.entry(id.as_str()).or_default() += d;
        }
        let rows: Vec<(String, f64)> = summed.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        self.runner.write(&build::add_scores(&rows)).await
    }

    async fn upsert_feeds(&self, rows: &[FeedsRow]) -> Result<()> {
        for part in rows.chunks(self.batch_rows) {
            self.runner.write(&build::upsert_feeds(part)).await?;
        }
        Ok(())
    }

    async fn set_api_status(&self, change: &StatusChange) -> Result<bool> {
        Ok(!self.runner.read(&build::set_status(change)).await?.is_empty())
    }

    async fn successors(&self, id: &str, k: usize) -> Result<Vec<Successor>> {
        let rows = self.runner.read(&build::successors(id, k)).await?;
        Ok(rows
            .iter()
            .map(|r| Successor {
                id: as_str(&r[0]),
                count: as_u64(&r[1]),
                static_weight: as_f64(&r[2]),
                dynamic_weight: as_f64(&r[3]),
            })
            .collect())
    }

    async fn snapshot(&self) -> Result<GraphSnapshot> {
        let mut snap = self.node_snapshot().await?;
        let next_cols: &[&str] = &["from", "to", "count", "static_weight", "dynamic_weight"];
        for r in self.runner.read(&Stmt::new(ALL_NEXT, next_cols)).await? {
            snap.next.insert(
                (as_str(&r[0]), as_str(&r[1])),
                NextEdge { count: as_u64(&r[2]), static_weight: as_f64(&r[3]), dynamic_weight: as_f64(&r[4]) },
            );
        }
        for r in self.runner.read(&Stmt::new(ALL_FEEDS, &["from", "to", "fields"])).await? {
            snap.feeds.insert((as_str(&r[0]), as_str(&r[1])), as_strings(&r[2]));
        }
        Ok(snap)
    }

    async fn node_snapshot(&self) -> Result<GraphSnapshot> {
        let mut snap = GraphSnapshot::default();
        for r in self.runner.read(&Stmt::new(ALL_APIS, API_COLUMNS)).await? {
            let node = ApiNode {
                id: as_str(&r[0]),
                name: as_str(&r[1]),
                tool: as_str(&r[2]),
                category: as_str(&r[3]),
                description: as_str(&r[4]),
                method: as_str(&r[5]),
                url: as_str(&r[6]),
                parameters: as_str(&r[7]),
                required: as_strings(&r[8]),
                output_fields: as_strings(&r[9]),
                status: as_str(&r[10]),
                calls: as_u64(&r[11]),
                successes: as_u64(&r[12]),
                score: as_f64(&r[13]),
                status_reason: as_str(&r[14]),
                status_since: as_str(&r[15]),
                probe: as_str(&r[16]),
            };
            snap.apis.insert(node.id.clone(), node);
        }
        let tool_cols: &[&str] = &["id", "name", "description", "category"];
        for r in self.runner.read(&Stmt::new(ALL_TOOLS, tool_cols)).await? {
            let t = ToolNode {
                id: as_str(&r[0]),
                name: as_str(&r[1]),
                description: as_str(&r[2]),
                category: as_str(&r[3]),
            };
            snap.tools.insert(t.id.clone(), t);
        }
        for r in self.runner.read(&Stmt::new(ALL_CATEGORIES, &["id", "name"])).await? {
            let c = CategoryNode { id: as_str(&r[0]), name: as_str(&r[1]) };
            snap.categories.insert(c.id.clone(), c);
        }
        Ok(snap)
    }

    async fn stats(&self) -> Result<GraphStats> {
        Ok(GraphStats {
            apis: self.count(COUNT_APIS).await?,
            tools: self.count(COUNT_TOOLS).await?,
            categories: self.count(COUNT_CATEGORIES).await?,
            next_edges: self.count(COUNT_NEXT).await?,
            feeds_edges: self.count(COUNT_FEEDS).await?,
            ingested_runs: self.count(COUNT_RUNS).await?,
        })
    }

    async fn ping(&self) -> Result<()> {
        self.runner.ping().await
    }

    async fn set_weights_dirty(&self, dirty: bool) -> Result<()> {
        self.runner.write(&build::set_meta("weights_dirty", if dirty { "1" } else { "0" })).await
    }

    async fn weights_dirty(&self) -> Result<bool> {
        let rows = self.runner.read(&build::get_meta("weights_dirty")).await?;
        Ok(rows.first().and_then(|r| r.first()).map(|v| as_str(v) == "1").unwrap_or(false))
    }

    async fn set_model_parts(&self, parts: &[(String, String)]) -> Result<()> {
        for chunk in parts.chunks(MODEL_PARTS_PER_WRITE) {
            self.runner.write(&build::set_model_parts(chunk)).await?;
        }
        Ok(())
    }

    async fn model_parts(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let rows = self.runner.read(&build::model_parts(prefix)).await?;
        Ok(rows.iter().filter_map(|r| Some((as_str(r.first()?), as_str(r.get(1)?)))).collect())
    }

    async fn cypher_read(&self, query: &str, params: Map<String, Value>, limits: CypherLimits) -> Result<CypherRows> {
        refuse_writes(query)?;
        let slot = self.queries.clone().try_acquire_owned().map_err(|_| {
            EngineError::Busy(
                "another graph query is still running on the server (one that ran past its limit holds its slot until the server stops it); retry shortly"
                    .into(),
            )
        })?;
        self.runner.read_only(query, params, limits, slot).await
    }
}

/// Refuse queries that would write, before they reach the server (the server-side read-only mode
/// is the real guard; this gives a clear message early).
pub fn refuse_writes(query: &str) -> Result<()> {
    let upper = blank_literals(query).to_uppercase();
    let words: Vec<&str> = upper.split(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '.').collect();
    const WRITES: &[&str] = &["CREATE", "MERGE", "DELETE", "DETACH", "SET", "REMOVE", "DROP", "LOAD", "FOREACH"];
    if let Some(w) = words.iter().find(|w| WRITES.contains(w)) {
        return Err(EngineError::bad_input(format!(
            "graph cypher is read-only: the query contains `{w}`; only reading clauses (MATCH, WITH, RETURN, …) are allowed"
        )));
    }
    if words.iter().any(|w| w.starts_with("DBMS.") || w.starts_with("APOC.") || w.starts_with("GDS.")) {
        return Err(EngineError::bad_input("graph cypher does not run procedures of dbms, apoc or gds"));
    }
    if query.len() > 64 * 1024 {
        return Err(EngineError::bad_input("graph cypher queries are limited to 64 KiB"));
    }
    Ok(())
}

/// The query with the insides of quoted literals and comments blanked, so their words are not
/// taken for clauses.
fn blank_literals(query: &str) -> String {
    let mut out = String::with_capacity(query.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for ch in query.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == q {
                    quote = None;
                    out.push(ch);
                    continue;
                }
                out.push(' ');
            }
            None => {
                if ch == '\'' || ch == '"' || ch == '`' {
                    quote = Some(ch);
                }
                out.push(ch);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApiCountDelta, EdgeDelta};

    #[test]
    fn statements_are_parameterized() {
        let b = ContributionBatch {
            keys: vec!["k1".into()],
            api_counts: vec![ApiCountDelta { id: "a'); MATCH (n) DETACH DELETE n //".into(), calls: 2, successes: 1 }],
            edges: vec![EdgeDelta { from: START_ID.into(), to: "x/y/z".into(), n: 3 }],
        };
        let s = build::apply(&b);
        // User data only travels as parameters, never inside the query text.
        assert!(!s.text.contains("DETACH DELETE"));
        assert_eq!(s.params["apis"][0]["id"], "a'); MATCH (n) DETACH DELETE n //");
        assert_eq!(s.params["edges"][0]["n"], 3);
        assert_eq!(s.params["keys"][0], "k1");
        assert!(s.text.contains("UNWIND $apis") && s.text.contains("UNWIND $edges") && s.text.contains("UNWIND $keys"));
    }

    #[test]
    fn setup_differs_only_in_schema_syntax() {
        let neo = setup_statements(Dialect::Neo4j);
        let falkor = setup_statements(Dialect::FalkorDb);
        assert_eq!(neo.len(), falkor.len());
        assert!(neo[0].starts_with("CREATE CONSTRAINT step_id IF NOT EXISTS FOR (n:Step) REQUIRE n.id IS UNIQUE"));
        assert_eq!(falkor[0], "CREATE INDEX FOR (n:Step) ON (n.id)");
    }

    #[test]
    fn writes_are_refused_in_user_queries() {
        assert!(refuse_writes("MATCH (a:Api) RETURN a.id LIMIT 5").is_ok());
        assert!(refuse_writes("MATCH (a:Api) WHERE a.name = 'set' RETURN a").is_ok());
        for q in ["MATCH (n) DETACH DELETE n", "CREATE (:X)", "MATCH (a) SET a.x = 1", "CALL dbms.killQueries([])"] {
            assert!(refuse_writes(q).is_err(), "{q}");
        }
    }

    #[test]
    fn tools_are_upserted_once_each_in_the_order_of_their_last_api() {
        let api = |id: &str, tool: &str, desc: &str| ApiUpsert {
            id: id.into(),
            name: id.into(),
            tool: tool.into(),
            tool_id: format!("c/{tool}"),
            tool_description: desc.into(),
            category: "C".into(),
            category_id: "c".into(),
            description: String::new(),
            method: "GET".into(),
            url: String::new(),
            parameters: "[]".into(),
            required: vec![],
            output_fields: vec![],
        };
        let rows = [api("c/x/1", "x", "old"), api("c/y/1", "y", "y"), api("c/x/2", "x", "new")];
        let s = build::upsert_tools(&rows);
        let tools = s.params["rows"].as_array().unwrap();
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0]["tool_id"], "c/y");
        assert_eq!(tools[1]["tool_id"], "c/x");
        assert_eq!(tools[1]["tool_description"], "new");
        assert_eq!(build::upsert_apis(&rows).params["rows"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn successor_query_orders_and_limits() {
        let s = build::successors("a/b/c", 5);
        assert!(s.text.contains("ORDER BY dynamic_weight DESC") && s.text.contains("LIMIT $k"));
        assert_eq!(s.params["k"], 5);
    }
}
