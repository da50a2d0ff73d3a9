//! The openCypher statements FalkorDB and Neo4j share, and their builders: what each write sends
//! and each read returns ([`super::cypher::CypherStore`] runs them).

use crate::{ApiUpsert, ContributionBatch};
use serde_json::{json, Map, Value};
use toolgraph_schema::{FeedsRow, StatusChange, WeightRow, END_ID, START_ID};

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
    pub(super) fn new(text: &'static str, columns: &'static [&'static str]) -> Self {
        Stmt { text, params: Map::new(), columns }
    }
    pub(super) fn param(mut self, name: &str, value: Value) -> Self {
        self.params.insert(name.to_string(), value);
        self
    }
}

const LABEL_KEYS: &[(&str, &str)] = &[
    ("Step", "id"),
    ("Api", "id"),
    ("Tool", "id"),
    ("Category", "id"),
    ("IngestedRun", "key"),
    ("Meta", "id"),
    ("Count", "key"),
];

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
MERGE (:IngestedRun {key: k})
WITH count(*) AS keys_done
UNWIND $counts AS c
MERGE (m:Count {key: c.key})
ON CREATE SET m.n = 0
SET m.n = m.n + c.n
WITH count(*) AS counts_done
MERGE (g:Meta {id: 'generation'})
ON CREATE SET g.n = 0
SET g.n = g.n + 1";

/// Moves the store's generation (after a write that changes what a snapshot reads).
pub const BUMP_GENERATION: &str = "MERGE (g:Meta {id: 'generation'}) ON CREATE SET g.n = 0 SET g.n = g.n + 1";
pub const GENERATION: &str = "MATCH (g:Meta {id: 'generation'}) RETURN g.n AS n";

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
pub(super) const API_COLUMNS: &[&str] = &[
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
pub const MODEL_COUNTS: &str =
    "MATCH (m:Count) WHERE m.key STARTS WITH $prefix RETURN m.key AS key, m.n AS n ORDER BY key";

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
            .param("counts", Value::Array(batch.counts.iter().map(|c| json!({"key": c.key, "n": c.n})).collect()))
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

    pub fn model_counts(prefix: &str) -> Stmt {
        Stmt::new(MODEL_COUNTS, &["key", "n"]).param("prefix", json!(prefix))
    }

    pub fn bump_generation() -> Stmt {
        Stmt::new(BUMP_GENERATION, &[])
    }

    pub fn generation() -> Stmt {
        Stmt::new(GENERATION, &["n"])
    }
}
