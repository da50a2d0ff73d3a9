//! Operations: `/healthz`, `/readyz`, `/metrics` and `/v1/models`.
use super::error::ApiError;
use super::shared::Daemon;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The process answers (`{"status": "ok"}`).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Health {
    status: &'static str,
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "operations", security(()), responses((status = 200, description = "alive", body = Health)))]
pub(super) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Ready to serve: what the daemon runs on.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Ready {
    /// `ready`.
    status: &'static str,
    /// The graph store's backend (`embedded`, `falkordb`, `neo4j`).
    graph: String,
    /// APIs in the graph.
    apis: u64,
    /// The vector store's backend.
    vectors: String,
    /// APIs in the vector index.
    indexed: u64,
    /// The MCP servers whose tools are APIs (they do not make the daemon unready).
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp: Option<Vec<Value>>,
}

/// Readiness: the graph and vector stores answer within 3 s and the daemon is not draining.
#[utoipa::path(get, path = "/readyz", tag = "operations", security(()), responses((status = 200, description = "ready", body = Ready), (status = 503, description = "not ready, or draining (Retry-After)", body = super::error::ErrorBody)))]
pub(super) async fn readyz(State(d): State<Arc<Daemon>>) -> Result<Json<Ready>, ApiError> {
    if d.draining.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable("draining", "shutting down", d.settings().server.retry_after_s));
    }
    let b = &d.stack;
    let limit = Duration::from_secs(3);
    let graph = tokio::time::timeout(limit, b.store.stats()).await;
    let vectors = tokio::time::timeout(limit, b.vectors.count(toolgraph_engine::vector::APIS)).await;
    fn problem<T>(r: &Result<toolgraph_engine::Result<T>, tokio::time::error::Elapsed>) -> String {
        match r {
            Ok(Ok(_)) => "ok".into(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".into(),
        }
    }
    match (graph, vectors) {
        (Ok(Ok(g)), Ok(Ok(n))) => {
            #[allow(unused_mut)]
            let mut body = Ready {
                status: "ready",
                graph: b.store.backend().to_string(),
                apis: g.apis,
                vectors: b.vectors.backend().to_string(),
                indexed: n as u64,
                mcp: None,
            };
            // MCP servers do not make the daemon unready (their APIs fail like any API that is down).
            #[cfg(feature = "mcp")]
            if !d.mcp.is_empty() {
                body.mcp = Some(d.mcp.status());
            }
            Ok(Json(body))
        }
        (g, v) => Err(ApiError::unavailable(
            "not_ready",
            format!(
                "graph store ({}): {}; vector store ({}): {}",
                b.store.backend(),
                problem(&g),
                b.vectors.backend(),
                problem(&v)
            ),
            d.settings().server.retry_after_s,
        )),
    }
}

/// Prometheus metrics (text exposition format 0.0.4).
#[utoipa::path(get, path = "/metrics", tag = "operations", security(()), responses((status = 200, description = "the metrics", body = String, content_type = "text/plain")))]
pub(super) async fn metrics_text(State(d): State<Arc<Daemon>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], d.metrics.render())
}

/// The configured LLMs and planners.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ModelList {
    /// The model the `llm` planner uses unless a request names another.
    default: String,
    /// The planners a request may ask for.
    planners: Vec<String>,
    models: Vec<toolgraph_engine::plan::models::ModelInfo>,
}

/// The configured LLMs (name, model, endpoint, sampling; never keys) and the default.
#[utoipa::path(get, path = "/v1/models", tag = "runs", responses((status = 200, description = "the models", body = ModelList)))]
pub(super) async fn list_models(State(d): State<Arc<Daemon>>) -> Json<ModelList> {
    Json(ModelList {
        default: d.models.default_name().to_string(),
        planners: toolgraph_schema::PlannerKind::names().iter().map(|s| s.to_string()).collect(),
        models: d.models.list(),
    })
}
