//! Neo4j adapter: the shared Cypher layer over Bolt (neo4rs). Every write runs in an explicit
//! transaction. User queries run in auto-commit transactions opened in READ access mode with a
//! server-side timeout, so the server itself refuses anything that writes (the word check in
//! [`super::cypher::refuse_writes`] only gives an earlier, clearer message).

use super::cypher::{CypherRunner, CypherStore, Dialect, Stmt};
use crate::{CypherLimits, CypherRows};
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use neo4rs::{BoltType, ConfigBuilder, Graph, Query};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;

const BACKEND: &str = "neo4j";

pub struct Neo4jRunner {
    graph: Graph,
    timeout: Duration,
}

/// Connect with Bolt to `uri` (`neo4j://host:port` or `bolt://host:port`). Connections are made
/// lazily: a server that is down now fails the first statement (a transient error), and the pool
/// reconnects by itself once it is back.
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
        .max_connections(16)
        .connection_timeout(Duration::from_secs(5))
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .build()
        .map_err(|e| EngineError::Config(format!("bad Neo4j settings for {uri}: {e}")))?;
    let graph = Graph::connect(config).map_err(|e| {
        EngineError::store(BACKEND, classify(&e), format!("cannot connect to {uri}: {}", redact(&e.to_string())))
    })?;
    let runner = Neo4jRunner { graph, timeout: Duration::from_secs(300) };
    // Fail now, with a clear message, when the server cannot be reached or refuses the password.
    runner.ping(Duration::from_secs(10)).await.map_err(|e| {
        EngineError::store(
            BACKEND,
            e.class(),
            format!("cannot reach Neo4j at {uri}: {e} (for development: scripts/neo4j.sh start)"),
        )
    })?;
    Ok(CypherStore::new(runner, batch_rows))
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
        E::IOError { .. }
        | E::ConnectionError
        | E::ConnectionTimedOut
        | E::IncompleteBoltExchange
        | E::RequestIgnoredError => ErrorClass::Transient,
        E::Neo4j(inner) if inner.code().starts_with("Neo.TransientError") => ErrorClass::Transient,
        E::Neo4j(inner) if inner.code().starts_with("Neo.ClientError.Statement") => ErrorClass::BadInput,
        // The pool could not open a connection (server down, restarting): worth a retry later.
        E::UnexpectedMessage(m) | E::ServerUnavailableError(m) if m.contains("connection") || m.contains("pool") => {
            ErrorClass::Transient
        }
        _ => ErrorClass::Permanent,
    }
}

/// How often a write that lost a lock conflict is run again.
const CONFLICT_RETRIES: u32 = 8;

/// A transaction another one's locks rolled back (a deadlock, a lock wait that timed out): safe
/// to run again whole.
fn conflict(e: &neo4rs::Error) -> bool {
    matches!(e, neo4rs::Error::Neo4j(inner) if inner.code().starts_with("Neo.TransientError.Transaction"))
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

/// A user's query as the server must run it: READ access mode (the server refuses writes,
/// schema changes and write procedures) and a transaction timeout the server enforces.
pub fn read_only_query(text: &str, params: &Map<String, Value>, timeout_ms: u64) -> Result<Query> {
    Ok(query_of(text, params)?.extra("tx_timeout", timeout_ms.clamp(1, i64::MAX as u64) as i64))
}

/// Why the server refused a user's query, in words a user can act on.
fn refusal(e: neo4rs::Error, timeout_ms: u64) -> EngineError {
    if let neo4rs::Error::Neo4j(inner) = &e {
        let code = inner.code();
        if code.contains("TransactionTimedOut") || code.contains("Transaction.TransactionTerminated") {
            return EngineError::bad_input(format!("query ran past its {timeout_ms} ms limit (stopped by Neo4j)"));
        }
        if code.contains("MemoryPoolOutOfMemoryError") {
            // db.memory.transaction.max: the query, not the server, is the problem.
            let msg = inner.message().lines().next().unwrap_or_default();
            return EngineError::bad_input(format!(
                "Neo4j stopped the query: it needed more memory than one query may use ({msg})"
            ));
        }
        if code.starts_with("Neo.ClientError") {
            let msg = inner.message().lines().next().unwrap_or_default();
            if code.contains("AccessMode") || code.contains("Forbidden") || msg.contains("read access mode") {
                return EngineError::bad_input(format!(
                    "graph cypher is read-only: Neo4j refused the query ({code}: {msg})"
                ));
            }
            return EngineError::bad_input(format!("Neo4j refused the query ({code}): {msg}"));
        }
    }
    store_err(e)
}

/// neo4rs hands a row's columns over as a map, without the order of the query's RETURN clause:
/// put them back in the order they appear in the query's last RETURN (`AS name` first, else the
/// expression's text); columns not found there follow, alphabetically.
pub fn column_order(query: &str, mut columns: Vec<String>) -> Vec<String> {
    let upper = query.to_uppercase();
    let tail_at = upper.rfind("RETURN").unwrap_or(0);
    let tail = &query[tail_at..];
    let position = |c: &str| {
        let alias = tail.to_uppercase().find(&format!("AS {}", c.to_uppercase())).map(|p| p + 3);
        alias.or_else(|| tail.find(c)).unwrap_or(usize::MAX)
    };
    columns.sort_by(|a, b| position(a).cmp(&position(b)).then_with(|| a.cmp(b)));
    columns
}

impl Neo4jRunner {
    async fn timed<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(self.timeout, fut)
            .await
            .map_err(|_| EngineError::store(BACKEND, ErrorClass::Transient, "query timed out"))?
    }

    /// One round trip (`RETURN 1`) within `limit`.
    pub async fn ping(&self, limit: Duration) -> Result<()> {
        let fut = async {
            let mut stream = self.graph.execute_read(neo4rs::query("RETURN 1 AS ok")).await.map_err(store_err)?;
            while stream.next().await.map_err(store_err)?.is_some() {}
            Ok(())
        };
        tokio::time::timeout(limit, fut)
            .await
            .map_err(|_| EngineError::store(BACKEND, ErrorClass::Transient, "no answer from Neo4j"))?
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

    /// A write transaction; one that lost a lock conflict to another writer (a deadlock two
    /// daemons' increments can make, `Neo.TransientError.Transaction.*`) was rolled back whole
    /// and is run again, at most [`CONFLICT_RETRIES`] times, as Neo4j's drivers retry theirs.
    #[tracing::instrument(name = "store.neo4j.write", level = "debug", skip_all, fields(op = stmt.op()))]
    async fn write(&self, stmt: &Stmt) -> Result<()> {
        let mut attempt = 0u32;
        loop {
            let q = query_of(stmt.text, &stmt.params)?;
            let txn = async {
                let mut txn = self.graph.start_txn().await.map_err(|e| (false, store_err(e)))?;
                txn.run(q).await.map_err(|e| (conflict(&e), store_err(e)))?;
                txn.commit().await.map_err(|e| (conflict(&e), store_err(e)))
            };
            let outcome = tokio::time::timeout(self.timeout, txn).await.unwrap_or_else(|_| {
                Err((false, EngineError::store(BACKEND, ErrorClass::Transient, "query timed out")))
            });
            match outcome {
                Err((true, e)) if attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "a write lost a lock conflict; running it again");
                    tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
                }
                other => return other.map_err(|(_, e)| e),
            }
        }
    }

    /// Our own statements (some of which write and return rows, such as a status change): an
    /// auto-commit transaction in write mode.
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
        self.timed(async { self.graph.run(neo4rs::query(text)).await.map_err(store_err) }).await?;
        Ok(true)
    }

    async fn ping(&self) -> Result<()> {
        Neo4jRunner::ping(self, Duration::from_secs(3)).await
    }

    async fn read_only(
        &self,
        query: &str,
        params: Map<String, Value>,
        limits: CypherLimits,
        _slot: OwnedSemaphorePermit,
    ) -> Result<CypherRows> {
        // Neo4j ends a READ transaction at its timeout itself: the slot is held for the call.
        let q = read_only_query(query, &params, limits.timeout_ms)?;
        let fut = async {
            let mut stream = self.graph.execute_read(q).await.map_err(|e| refusal(e, limits.timeout_ms))?;
            let mut out = CypherRows::default();
            let mut bytes = 0;
            while let Some(row) = stream.next().await.map_err(|e| refusal(e, limits.timeout_ms))? {
                if out.columns.is_empty() {
                    out.columns = column_order(query, row.keys().iter().map(|k| k.value.clone()).collect());
                }
                let values = out.columns.iter().map(|c| row.get::<Value>(c).unwrap_or(Value::Null)).collect();
                if !out.push_within(values, limits, &mut bytes)? {
                    // Dropping the stream resets its connection, which ends the query on the server.
                    break;
                }
            }
            Ok(out)
        };
        // The server enforces the limit; this is the backstop for a server that does not answer.
        tokio::time::timeout(Duration::from_millis(limits.timeout_ms.saturating_add(2000)), fut)
            .await
            .map_err(|_| EngineError::bad_input(format!("query ran past its {} ms limit", limits.timeout_ms)))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::cypher::build;
    use crate::{ApiCountDelta, ContributionBatch, EdgeDelta};

    #[test]
    fn batches_become_bolt_lists_of_maps() {
        let b = ContributionBatch {
            keys: vec!["k".into()],
            api_counts: vec![ApiCountDelta { id: "a/b/c".into(), calls: 3, successes: 2 }],
            edges: vec![EdgeDelta { from: "START".into(), to: "a/b/c".into(), n: 1 }],
            counts: vec![crate::CountDelta { key: "m/[\"x\"]') DETACH DELETE".into(), n: 2 }],
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
        use crate::ApiUpsert;
        use toolgraph_schema::{FeedsRow, WeightRow};
        let api = ApiUpsert {
            id: "a/b/c".into(),
            name: "c".into(),
            tool: "B".into(),
            tool_id: "a/b".into(),
            tool_description: String::new(),
            category: "A".into(),
            category_id: "a".into(),
            description: "d".into(),
            method: "GET".into(),
            url: String::new(),
            parameters: "[]".into(),
            required: vec![],
            output_fields: vec!["x.y".into()],
        };
        let ids = vec!["a/b/c".to_string()];
        let stmts = vec![
            build::upsert_tools(std::slice::from_ref(&api)),
            build::upsert_apis(&[api]),
            build::ingested_keys(&ids),
            build::edge_counts(Some(&ids)),
            build::edge_counts(None),
            build::predecessors(&ids),
            build::set_weights(&[WeightRow {
                from: "START".into(),
                to: "a/b/c".into(),
                static_weight: 1.0,
                dynamic_weight: 1.0,
            }]),
            build::add_scores(&[("a/b/c".into(), -1.5)]),
            build::upsert_feeds(&[FeedsRow { from: "a/b/c".into(), to: "a/b/d".into(), fields: vec!["y".into()] }]),
            build::set_status(&toolgraph_schema::StatusChange {
                id: "a/b/c".into(),
                status: "invalid".into(),
                reason: "r".into(),
                since: "2026-01-01T00:00:00Z".into(),
                probe: None,
            }),
            build::successors("a/b/c", 5),
            build::terminals(),
            build::set_meta("weights_dirty", "1"),
            build::get_meta("weights_dirty"),
            build::model_counts("arguments/"),
            build::bump_generation(),
            build::generation(),
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
            BoltType::from("id"),
            BoltType::from("calls"),
            BoltType::from("score"),
            BoltType::from("required"),
            BoltType::from("url"),
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
        assert_eq!(
            v,
            vec![
                serde_json::json!("a/b/c"),
                serde_json::json!(42),
                serde_json::json!(0.25),
                serde_json::json!(["q", "lang"]),
                Value::Null,
                Value::Null,
            ]
        );
    }

    #[test]
    fn columns_follow_the_return_clause() {
        let cols = |q: &str, c: &[&str]| column_order(q, c.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            cols("UNWIND range(1, 5) AS x RETURN x AS value, x * 2 AS double", &["double", "value"]),
            ["value", "double"]
        );
        assert_eq!(cols("MATCH (b)-->(a) RETURN b.id, a.id", &["a.id", "b.id"]), ["b.id", "a.id"]);
        assert_eq!(cols("MATCH (n) WITH n AS z RETURN count(z) AS n, 1 AS a", &["a", "n"]), ["n", "a"]);
        assert_eq!(cols("RETURN 1", &["y", "x"]), ["x", "y"]);
    }

    #[test]
    fn uris_with_credentials_are_redacted() {
        assert_eq!(redact("cannot reach neo4j://user:pw@db:7687 now"), "cannot reach <uri> now");
    }
}
