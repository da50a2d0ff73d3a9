//! `/v1/graph/cypher`: read-only Cypher over the graph store, bounded.

use super::*;

/// `POST /v1/graph/cypher`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CypherRequest {
    pub(super) query: String,
    #[serde(default)]
    pub(super) params: Map<String, Value>,
}

pub(super) const MAX_QUERY_CHARS: usize = 10_000;

pub(super) async fn cypher(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, ApiJson(body): ApiJson<CypherRequest>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "Cypher")?;
    let store = &d.stack.store;
    if store.backend() == "embedded" {
        return Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "cypher_unsupported", "the embedded graph store has no Cypher; run the daemon on FalkorDB (falkordb://) or Neo4j (neo4j://) to query the graph"));
    }
    if body.query.trim().is_empty() || body.query.len() > MAX_QUERY_CHARS {
        return Err(ApiError::invalid(format!("`query` must be 1..{MAX_QUERY_CHARS} characters")));
    }
    let limits = toolgraph_engine::graph::CypherLimits::of(&d.settings().store);
    match store.cypher_read(&body.query, body.params, limits).await {
        Ok(rows) => Ok(Json(json!(rows))),
        Err(e) if e.class() == toolgraph_engine::ErrorClass::Transient => Err(e.into()),
        Err(e) => Err(ApiError::invalid(format!("{e}")).with_code("cypher_error")),
    }
}
