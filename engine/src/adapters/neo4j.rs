//! Neo4j adapter: the shared Cypher layer over Bolt (neo4rs). Every write runs in an explicit
//! transaction; user queries run in a transaction that is always rolled back, so they cannot
//! change the graph whatever they contain.

use super::cypher::{CypherRunner, CypherStore, Dialect, Stmt};
use crate::graph::{CypherLimits, CypherRows};
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use neo4rs::{BoltType, ConfigBuilder, Graph, Query};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};
use std::time::Duration;

const BACKEND: &str = "neo4j";

pub struct Neo4jRunner {
    graph: Graph,
    timeout: Duration,
}

/// Connect with Bolt to `uri` (`neo4j://host:port` or `bolt://host:port`).
pub async fn connect(
    uri: &str,
    user: &str,
    password: &SecretString,
    database: &str,
    batch_rows: usize,
) -> Result<CypherStore<Neo4jRunner>> {
    let config = ConfigBuilder::default()
        .uri(uri)
        .user(user)
        .password(password.expose_secret())
        .db(database)
        .max_connections(8)
        .build().map_err(|e| EngineError::Config(format!("bad Neo4j settings for {uri}: {e}")))?;
    let graph = Graph::connect(config).await.map_err(|e| {
        EngineError::store(BACKEND, classify(&e), format!("cannot connect to {uri}: {}", redact(&e.to_string())))
    })?;
    Ok(CypherStore::new(Neo4jRunner { graph, timeout: Duration::from_secs(300) }, batch_rows))
}

/// Errors never carry the password, but the URI may carry user info: keep only what is safe.
fn redact(msg: &str) -> String {
    msg.split_whitespace()
        .map(|w| if w.contains('@') && w.contains("://") { "<uri>" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

fn classify(e: &neo4rs::Error) -> ErrorClass {
    use neo4rs::Error as E;
    match e {
        E::IOError { .. } | E::ConnectionError => ErrorClass::Transient,
        E::Neo4j(inner) if inner.code().starts_with("Neo.TransientError") => ErrorClass::Transient,
        E::Neo4j(inner) if inner.code().starts_with("Neo.ClientError.Statement") => ErrorClass::BadInput,
        _ => ErrorClass::Permanent,
    }
}

fn store_err(e: neo4rs::Error) -> EngineError {
    EngineError::store(BACKEND, classify(&e), redact(&e.to_string()))
}

/// JSON parameter → Bolt value.
pub fn to_bolt(v: &Value) -> Result<BoltType> {
    BoltType::try_from(v.clone()).map_err(|e| EngineError::bad_input(format!("parameter cannot be sent to Neo4j: {e}")))
}

/// The values of `columns` in a Bolt row, as JSON (missing or unreadable values are null).
pub fn row_values(row: &neo4rs::Row, columns: &[&str]) -> Vec<Value> {
    columns.iter().map(|c| row.get::<Value>(c).unwrap_or(Value::Null)).collect()
}

/// A neo4rs query from a statement's text and parameters.
pub fn query_of(text: &str, params: &Map<String, Value>) -> Result<Query> {
    let mut q = neo4rs::query(text);
    for (k, v) in params {
        q = q.param(k, to_bolt(v)?);
    }
    Ok(q)
}

impl Neo4jRunner {
    async fn timed<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(self.timeout, fut)
            .await
            .map_err(|_| EngineError::store(BACKEND, ErrorClass::Transient, "query timed out"))?
    }
}

#[async_trait]
impl CypherRunner for Neo4jRunner {
    fn backend(&self) -> &'static str {
        BACKEND
    }
    fn dialect(&self) -> Dialect {
        Dialect::Neo4j
    }

    #[tracing::instrument(name = "store.neo4j.write", level = "debug", skip_all, fields(op = stmt.op()))]
    async fn write(&self, stmt: &Stmt) -> Result<()> {
        let q = query_of(stmt.text, &stmt.params)?;
        self.timed(async {
            let mut txn = self.graph.start_txn().await.map_err(store_err)?;
            txn.run(q).await.map_err(store_err)?;
            txn.commit().await.map_err(store_err)
        })
        .await
    }

    #[tracing::instrument(name = "store.neo4j.read", level = "debug", skip_all, fields(op = stmt.op()))]
    async fn read(&self, stmt: &Stmt) -> Result<Vec<Vec<Value>>> {
        let q = query_of(stmt.text, &stmt.params)?;
        self.timed(async {
            let mut stream = self.graph.execute(q).await.map_err(store_err)?;
            let mut rows = Vec::new();
            while let Some(row) = stream.next().await.map_err(store_err)? {
                rows.push(row_values(&row, stmt.columns));
            }
            Ok(rows)
        })
        .await
    }

    async fn schema(&self, text: &str) -> Result<bool> {
        self.graph.run(neo4rs::query(text)).await.map_err(store_err)?;
        Ok(true)
    }

    async fn read_only(&self, query: &str, params: Map<String, Value>, limits: CypherLimits) -> Result<CypherRows> {
        let q = query_of(query, &params)?;
        let fut = async {
            let mut txn = self.graph.start_txn().await.map_err(store_err)?;
            let mut out = CypherRows::default();
            {
                let mut stream = txn.execute(q).await.map_err(store_err)?;
                while let Some(row) = stream.next(txn.handle()).await.map_err(store_err)? {
                    if out.rows.len() == limits.max_rows {
                        out.truncated = true;
                        break;
                    }
                    let map: Map<String, Value> = row.to().unwrap_or_default();
                    if out.columns.is_empty() {
                        out.columns = map.keys().cloned().collect();
                    }
                    out.rows.push(out.columns.iter().map(|c| map.get(c).cloned().unwrap_or(Value::Null)).collect());
                }
            }
            txn.rollback().await.map_err(store_err)?;
            Ok(out)
        };
        tokio::time::timeout(Duration::from_millis(limits.timeout_ms), fut)
            .await
            .map_err(|_| EngineError::bad_input(format!("query ran past its {} ms limit", limits.timeout_ms)))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::cypher::build;
    use crate::graph::{ApiCountDelta, ContributionBatch, EdgeDelta};

    #[test]
    fn batches_become_bolt_lists_of_maps() {
        let b = ContributionBatch {
            keys: vec!["k".into()],
            api_counts: vec![ApiCountDelta { id: "a/b/c".into(), calls: 3, successes: 2 }],
            edges: vec![EdgeDelta { from: "START".into(), to: "a/b/c".into(), n: 1 }],
        };
        let stmt = build::apply(&b);
        let bolt = to_bolt(&stmt.params["apis"]).unwrap();
        match bolt {
            BoltType::List(list) => {
                assert_eq!(list.len(), 1);
                match &list.value[0] {
                    BoltType::Map(m) => {
                        assert_eq!(m.get::<i64>("calls").unwrap(), 3);
                        assert_eq!(m.get::<String>("id").unwrap(), "a/b/c");
                    }
                    other => panic!("not a map: {other:?}"),
                }
            }
            other => panic!("not a list: {other:?}"),
        }
        // Every statement of the layer builds into a neo4rs query.
        assert!(query_of(stmt.text, &stmt.params).is_ok());
    }

    #[test]
    fn every_statement_of_the_layer_becomes_a_neo4j_query() {
        use crate::graph::ApiUpsert;
        use toolgraph_schema::{FeedsRow, WeightRow};
        let api = ApiUpsert {
            id: "a/b/c".into(), name: "c".into(), tool: "B".into(), tool_id: "a/b".into(), tool_description: String::new(),
            category: "A".into(), category_id: "a".into(), description: "d".into(), method: "GET".into(), url: String::new(),
            parameters: "[]".into(), required: vec![], output_fields: vec!["x.y".into()],
        };
        let ids = vec!["a/b/c".to_string()];
        let stmts = vec![
            build::upsert_apis(&[api]),
            build::ingested_keys(&ids),
            build::edge_counts(Some(&ids)),
            build::edge_counts(None),
            build::predecessors(&ids),
            build::set_weights(&[WeightRow { from: "START".into(), to: "a/b/c".into(), static_weight: 1.0, dynamic_weight: 1.0 }]),
            build::add_scores(&[("a/b/c".into(), -1.5)]),
            build::upsert_feeds(&[FeedsRow { from: "a/b/c".into(), to: "a/b/d".into(), fields: vec!["y".into()] }]),
            build::set_status("a/b/c", "invalid"),
            build::successors("a/b/c", 5),
            build::terminals(),
            build::set_meta("weights_dirty", "1"),
            build::get_meta("weights_dirty"),
        ];
        for s in stmts {
            assert!(query_of(s.text, &s.params).is_ok(), "{}", s.text);
        }
    }

    #[test]
    fn bolt_rows_read_back_as_json() {
        use neo4rs::{BoltList, BoltNull};
        // A row as Neo4j sends the snapshot's API columns: strings, integers, floats, lists, null.
        let fields = BoltList::from(vec![
            BoltType::from("id"), BoltType::from("calls"), BoltType::from("score"),
            BoltType::from("required"), BoltType::from("url"),
        ]);
        let data = BoltList::from(vec![
            BoltType::from("a/b/c"),
            BoltType::from(42i64),
            BoltType::from(0.25f64),
            BoltType::from(vec![BoltType::from("q"), BoltType::from("lang")]),
            BoltType::Null(BoltNull),
        ]);
        let row = neo4rs::Row::new(fields, data);
        let v = row_values(&row, &["id", "calls", "score", "required", "url", "absent"]);
        assert_eq!(v, vec![
            serde_json::json!("a/b/c"), serde_json::json!(42), serde_json::json!(0.25),
            serde_json::json!(["q", "lang"]), Value::Null, Value::Null,
        ]);
    }

    #[test]
    fn uris_with_credentials_are_redacted() {
        assert_eq!(redact("cannot reach neo4j://user:pw@db:7687 now"), "cannot reach <uri> now");
    }
}
