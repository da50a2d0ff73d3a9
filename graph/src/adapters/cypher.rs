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

pub use super::statements::{build, setup_statements, Dialect, Stmt};
use super::statements::{
    ALL_APIS, ALL_CATEGORIES, ALL_FEEDS, ALL_NEXT, ALL_TOOLS, API_COLUMNS, COUNT_APIS, COUNT_CATEGORIES, COUNT_FEEDS,
    COUNT_NEXT, COUNT_RUNS, COUNT_TOOLS,
};
use crate::{ApiUpsert, ContributionBatch, CypherLimits, CypherRows, GraphStore};
use crate::{EngineError, Result};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use toolgraph_schema::{
    ApiNode, CategoryNode, EdgeCountRow, FeedsRow, GraphSnapshot, GraphStats, NextEdge, StatusChange, Successor,
    ToolNode, WeightRow,
};

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
        self.runner.write(&build::bump_generation()).await
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
        self.runner.write(&build::bump_generation()).await
    }

    async fn add_scores(&self, deltas: &[(String, f64)]) -> Result<()> {
        // Sum repeated ids first: one SET per node per statement.
        let mut summed: std::collections::BTreeMap<&str, f64> = Default::default();
        for (id, d) in deltas {
            *summed.entry(id.as_str()).or_default() += d;
        }
        let rows: Vec<(String, f64)> = summed.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        self.runner.write(&build::add_scores(&rows)).await?;
        self.runner.write(&build::bump_generation()).await
    }

    async fn upsert_feeds(&self, rows: &[FeedsRow]) -> Result<()> {
        for part in rows.chunks(self.batch_rows) {
            self.runner.write(&build::upsert_feeds(part)).await?;
        }
        self.runner.write(&build::bump_generation()).await
    }

    async fn set_api_status(&self, change: &StatusChange) -> Result<bool> {
        let changed = !self.runner.read(&build::set_status(change)).await?.is_empty();
        if changed {
            self.runner.write(&build::bump_generation()).await?;
        }
        Ok(changed)
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

    async fn model_counts(&self, prefix: &str) -> Result<Vec<(String, i64)>> {
        let rows = self.runner.read(&build::model_counts(prefix)).await?;
        Ok(rows.iter().filter_map(|r| Some((as_str(r.first()?), r.get(1)?.as_i64()?))).collect())
    }

    async fn generation(&self) -> Result<u64> {
        let rows = self.runner.read(&build::generation()).await?;
        Ok(rows.first().and_then(|r| r.first()).map(as_u64).unwrap_or(0))
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
    use toolgraph_schema::START_ID;

    #[test]
    fn statements_are_parameterized() {
        let b = ContributionBatch {
            keys: vec!["k1".into()],
            api_counts: vec![ApiCountDelta { id: "a'); MATCH (n) DETACH DELETE n //".into(), calls: 2, successes: 1 }],
            edges: vec![EdgeDelta { from: START_ID.into(), to: "x/y/z".into(), n: 3 }],
            counts: vec![crate::CountDelta { key: "m/[\"x\"]') DETACH DELETE".into(), n: 2 }],
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
