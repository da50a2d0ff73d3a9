//! `/v1/graph/cypher`: read-only Cypher over the graph store, bounded.
use super::auth::require_admin;
use super::error::{ApiError, ApiJson};
use super::shared::Daemon;
use crate::state::Caller;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::Arc;

/// `POST /v1/graph/cypher`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CypherRequest {
    /// A read-only query (writes are refused).
    #[schema(min_length = 1, max_length = 10000)]
    pub(super) query: String,
    /// Its `$parameters`.
    #[serde(default)]
    pub(super) params: Map<String, Value>,
}

pub(super) const MAX_QUERY_CHARS: usize = 10_000;

/// Read-only, parameterized Cypher (FalkorDB, Neo4j), bounded in rows, bytes and time (administrators).
#[utoipa::path(post, path = "/v1/graph/cypher", tag = "graph", request_body = CypherRequest,
    responses((status = 200, description = "columns and rows (`truncated` when a limit cut them)", body = toolgraph_graph::CypherRows),
        (status = 429, description = "as many queries as `store.query_max_running` are still running on the server (`cypher_busy`, with `Retry-After`)", body = super::error::ErrorBody),
        (status = 501, description = "the embedded store has no Cypher (`cypher_unsupported`)", body = super::error::ErrorBody)))]
pub(super) async fn cypher(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<CypherRequest>,
) -> Result<Json<toolgraph_graph::CypherRows>, ApiError> {
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
        Ok(rows) => Ok(Json(rows)),
        Err(toolgraph_engine::EngineError::Busy(m)) => {
            Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "cypher_busy", m).with_retry_after(1))
        }
        Err(e) if e.class() == toolgraph_engine::ErrorClass::Transient => Err(e.into()),
        Err(e) => Err(ApiError::invalid(format!("{e}")).with_code("cypher_error")),
    }
}
