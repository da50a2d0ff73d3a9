//! Operations: `/healthz`, `/readyz`, `/metrics` and `/v1/models`.

use super::*;

pub(super) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub(super) async fn readyz(State(d): State<Arc<Daemon>>) -> Result<Json<Value>, ApiError> {
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
            let mut body = json!({"status": "ready", "graph": b.store.backend(), "apis": g.apis, "vectors": b.vectors.backend(), "indexed": n});
            // MCP servers do not make the daemon unready (their APIs fail like any API that is down).
            #[cfg(feature = "mcp")]
            if !d.mcp.is_empty() {
                body["mcp"] = json!(d.mcp.status());
            }
            Ok(Json(body))
        }
        (g, v) => Err(ApiError::unavailable(
            "not_ready",
            format!("graph store ({}): {}; vector store ({}): {}", b.store.backend(), problem(&g), b.vectors.backend(), problem(&v)),
            d.settings().server.retry_after_s,
        )),
    }
}

pub(super) async fn metrics_text(State(d): State<Arc<Daemon>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], d.metrics.render())
}

/// `GET /v1/models`: the configured LLMs (never their keys) and the default.
pub(super) async fn list_models(State(d): State<Arc<Daemon>>) -> Json<Value> {
    Json(json!({"default": d.models.default_name(), "planners": toolgraph_schema::PlannerKind::names(), "models": d.models.list()}))
}
