//! FalkorDB adapter: the shared Cypher layer over FalkorDB's native protocol (the `falkordb`
//! crate's async client). A single GRAPH.QUERY is atomic, which is what a contribution batch needs.

use super::cypher::{CypherRunner, CypherStore, Dialect, Stmt};
use super::falkordb_gate::WriteGate;
use super::falkordb_query;
use crate::{CypherLimits, CypherRows};
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use falkordb::{AsyncGraph, FalkorClientBuilder, FalkorDBError, FalkorValue};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;

const BACKEND: &str = "falkordb";
/// The server's own limit on a run-path statement (`TIMEOUT`, ms).
const STATEMENT_TIMEOUT_MS: u64 = 300_000;
/// How much longer than that the client waits for the reply: FalkorDB notices its own limit only
/// between operations, and a server that no longer answers at all (a deadlock, a stopped process)
/// must fail the statement — a transient error the caller reports — instead of holding the run,
/// the ingest or the daemon's request forever (the `falkordb` crate waits indefinitely by default).
const REPLY_GRACE: Duration = Duration::from_secs(30);
/// How long opening the connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct FalkorRunner {
    graph: AsyncGraph,
    write_timeout_ms: u64,
    /// `HOST:PORT`: users' queries open connections of their own ([`falkordb_query`]).
    addr: String,
    name: String,
    /// Writes wait while a copy of the graph is made ([`super::falkordb_gate`]).
    gate: WriteGate,
}

/// Connect to `host:port` and select `graph`.
pub async fn connect(host_port: &str, graph: &str, batch_rows: usize) -> Result<CypherStore<FalkorRunner>> {
    let info = format!("falkor://{host_port}")
        .as_str()
        .try_into()
        .map_err(|e: FalkorDBError| EngineError::Config(format!("bad FalkorDB address {host_port}: {e}")))?;
    let client = FalkorClientBuilder::new_async()
        .with_connection_info(info)
        .with_connect_timeout(Some(CONNECT_TIMEOUT))
        .with_response_timeout(Some(Duration::from_millis(STATEMENT_TIMEOUT_MS) + REPLY_GRACE))
        .build()
        .await
        .map_err(|e| {
            EngineError::store(
                BACKEND,
                ErrorClass::Transient,
                format!("cannot connect to {host_port}: {e} (is it running? scripts/falkordb.sh start)"),
            )
        })?;
    let (addr, name) = (host_port.to_string(), graph.to_string());
    tokio::task::spawn_blocking(move || falkordb_query::sweep_views(&addr, &name));
    let runner = FalkorRunner {
        graph: client.select_graph(graph),
        write_timeout_ms: STATEMENT_TIMEOUT_MS,
        addr: host_port.to_string(),
        name: graph.to_string(),
        gate: WriteGate::new(host_port, graph),
    };
    Ok(CypherStore::new(runner, batch_rows))
}

fn classify(e: &FalkorDBError) -> ErrorClass {
    match e {
        FalkorDBError::ConnectionDown
        | FalkorDBError::NoConnection
        | FalkorDBError::EmptyConnection
        | FalkorDBError::Timeout { .. } => ErrorClass::Transient,
        // A reply not come within REPLY_GRACE past the server's limit ends as "timed out".
        FalkorDBError::RedisError(m)
            if ["LOADING", "BUSY", "connection", "timed out"].iter().any(|w| m.contains(w)) =>
        {
            ErrorClass::Transient
        }
        _ => ErrorClass::Permanent,
    }
}

/// Whether a statement changes the graph (a read that sets, merges, creates or deletes is one).
fn writes(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| ["MERGE", "CREATE", "SET", "DELETE", "REMOVE"].iter().any(|k| w.eq_ignore_ascii_case(k)))
}

fn store_err(e: FalkorDBError) -> EngineError {
    EngineError::store(BACKEND, classify(&e), e)
}

/// JSON parameter → FalkorDB value (encoded by the crate as an escaped Cypher literal).
pub fn to_falkor(v: &Value) -> FalkorValue {
    match v {
        Value::Null => FalkorValue::None,
        Value::Bool(b) => FalkorValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => FalkorValue::I64(i),
            None => FalkorValue::F64(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => FalkorValue::String(s.clone()),
        Value::Array(items) => FalkorValue::Array(items.iter().map(to_falkor).collect()),
        Value::Object(m) => FalkorValue::Map(m.iter().map(|(k, v)| (k.clone(), to_falkor(v))).collect()),
    }
}

/// FalkorDB value → JSON; nodes and edges become maps of their properties (with labels / type).
pub fn from_falkor(v: FalkorValue) -> Result<Value> {
    Ok(match v {
        FalkorValue::None => Value::Null,
        FalkorValue::Bool(b) => Value::Bool(b),
        FalkorValue::I64(i) => Value::from(i),
        FalkorValue::F64(f) => Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null),
        FalkorValue::String(s) => Value::String(s),
        FalkorValue::Array(items) => Value::Array(items.into_iter().map(from_falkor).collect::<Result<_>>()?),
        FalkorValue::Map(m) => Value::Object(map_of(m)?),
        FalkorValue::Node(n) => {
            let mut m = map_of(n.properties)?;
            m.insert("_labels".into(), Value::from(n.labels));
            Value::Object(m)
        }
        FalkorValue::Edge(e) => {
            let mut m = map_of(e.properties)?;
            m.insert("_type".into(), Value::from(e.relationship_type));
            Value::Object(m)
        }
        FalkorValue::Unparseable(s) => {
            return Err(EngineError::store(BACKEND, ErrorClass::Permanent, format!("unparseable value: {s}")))
        }
        other => Value::String(format!("{other:?}")),
    })
}

fn map_of(m: HashMap<String, FalkorValue>) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for (k, v) in m {
        out.insert(k, from_falkor(v)?);
    }
    Ok(out)
}

impl FalkorRunner {
    fn graph(&self) -> AsyncGraph {
        self.graph.clone()
    }
}

#[async_trait]
impl CypherRunner for FalkorRunner {
    fn backend(&self) -> &'static str {
        BACKEND
    }
    fn dialect(&self) -> Dialect {
        Dialect::FalkorDb
    }

    #[tracing::instrument(name = "store.falkordb.write", level = "debug", skip_all, fields(op = stmt.op()))]
    async fn write(&self, stmt: &Stmt) -> Result<()> {
        let mut g = self.graph();
        let mut q = g.query(stmt.text).with_timeout(self.write_timeout_ms as i64);
        for (k, v) in &stmt.params {
            q = q.with_param(k.as_str(), to_falkor(v));
        }
        self.gate.write(async { q.execute().await.map_err(store_err) }).await?;
        Ok(())
    }

    #[tracing::instrument(name = "store.falkordb.read", level = "debug", skip_all, fields(op = stmt.op()))]
    async fn read(&self, stmt: &Stmt) -> Result<Vec<Vec<Value>>> {
        let mut g = self.graph();
        let mut q = g.query(stmt.text).with_timeout(self.write_timeout_ms as i64);
        for (k, v) in &stmt.params {
            q = q.with_param(k.as_str(), to_falkor(v));
        }
        let res = if writes(stmt.text) {
            self.gate.write(async { q.execute().await.map_err(store_err) }).await?
        } else {
            q.execute().await.map_err(store_err)?
        };
        let mut rows = Vec::with_capacity(res.data.len());
        for row in res.data.into_values_lossy() {
            rows.push(row.into_iter().map(from_falkor).collect::<Result<Vec<_>>>()?);
        }
        Ok(rows)
    }

    async fn schema(&self, text: &str) -> Result<bool> {
        let mut g = self.graph();
        match self.gate.write(async { g.query(text).execute().await.map_err(store_err) }).await {
            Ok(_) => Ok(true),
            Err(e) if e.to_string().contains("already indexed") => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn ping(&self) -> Result<()> {
        let mut g = self.graph();
        let q = g.ro_query("RETURN 1").with_timeout(3000);
        tokio::time::timeout(std::time::Duration::from_secs(3), q.execute())
            .await
            .map_err(|_| EngineError::store(BACKEND, ErrorClass::Transient, "no answer from FalkorDB"))?
            .map_err(store_err)?;
        Ok(())
    }

    async fn read_only(
        &self,
        query: &str,
        params: Map<String, Value>,
        limits: CypherLimits,
        slot: OwnedSemaphorePermit,
    ) -> Result<CypherRows> {
        let mut text = String::new();
        if !params.is_empty() {
            text.push_str("CYPHER ");
            for (k, v) in &params {
                let mut chars = k.chars();
                let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !identifier {
                    return Err(EngineError::bad_input(format!("parameter `{k}` is not a Cypher identifier")));
                }
                let literal = falkordb::to_cypher_param(&to_falkor(v))
                    .map_err(|e| EngineError::bad_input(format!("parameter `{k}`: {e}")))?;
                text.push_str(&format!("{k}={literal} "));
            }
        }
        text.push_str(query);
        falkordb_query::read_only(&self.addr, &self.name, text, limits, slot).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_that_change_the_graph_take_a_writes_turn_and_reads_do_not() {
        assert!(writes("UNWIND $rows AS r MATCH (a:Api {id: r.id}) SET a.status = $status RETURN a.id"));
        assert!(writes("merge (m:Meta {id: $id})"));
        assert!(writes("MATCH (n) DETACH DELETE n"));
        assert!(!writes("MATCH (a:Api) RETURN a.id AS id, a.description AS description, a.created_at AS created"));
        assert!(!writes("MATCH (m:Meta {id: 'settings'}) RETURN m.value AS value"));
    }
}
