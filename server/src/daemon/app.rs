//! The HTTP application: the `/v1` routes, the router with its layers, `serve` with its drain.
use super::error::ApiError;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::auth::authorize;
use super::console;
use super::routes::{api_routes, documented_public};
use super::shared::Daemon;
use super::shared::ABANDON_WAIT;
use super::upkeep::maintain;
use super::upkeep::AbortOnDrop;

/// The router with every endpoint and layer.
pub fn router(d: Arc<Daemon>) -> Router {
    let s = d.settings().server.clone();
    let v1 = api_routes().route_layer(middleware::from_fn_with_state(d.clone(), authorize));
    #[cfg(feature = "mcp")]
    let sessions = Arc::new(rmcp::transport::streamable_http_server::session::local::LocalSessionManager::default());
    #[cfg(feature = "mcp")]
    let v1 = v1.merge(
        Router::new()
            .route_service("/mcp", super::mcp_serve::http_service(d.clone(), sessions.clone()))
            // Inside `authorize`: the caller is known when the session is checked.
            .route_layer(middleware::from_fn_with_state(
                super::mcp_sessions::SessionOwners::new(sessions, &s),
                super::mcp_sessions::bind_session,
            ))
            .route_layer(middleware::from_fn_with_state(d.clone(), authorize)),
    );
    let (public, _) = documented_public().split_for_parts();
    public
        .route("/assets/{*path}", get(console::asset))
        .merge(v1)
        .fallback(|| async { ApiError::not_found("no such endpoint (see GET /openapi.json)") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take that method (see GET /openapi.json)",
            )
        })
        .layer(middleware::from_fn_with_state(d.clone(), observe))
        .layer(middleware::map_response(json_errors))
        .layer(DefaultBodyLimit::max(s.max_body_bytes))
        .with_state(d)
}

/// Serve until `shutdown` resolves, then drain: in-flight requests (and streamed runs) finish
/// within `server.shutdown_grace_s`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    d: Arc<Daemon>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let grace = Duration::from_secs(d.settings().server.shutdown_grace_s);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let dd = d.clone();
    let signal = async move {
        shutdown.await;
        dd.drain();
        let _ = stop_tx.send(true);
        tracing::info!("shutting down: draining {} in-flight runs", dd.runs_in_flight());
    };
    let limits = super::listen::ConnLimits::from_settings(&d.settings().server);
    let counted = d.clone();
    let refused: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        counted.metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
    });
    let server = super::listen::serve_connections(listener, router(d.clone()), limits, refused, signal);
    let mut maintenance = AbortOnDrop(tokio::spawn(maintain(d.clone(), stop_rx.clone())));
    let mut stop = stop_rx;
    let deadline = async move {
        let _ = stop.wait_for(|s| *s).await;
        tokio::time::sleep(grace).await;
    };
    let out = tokio::select! {
        r = server => r,
        _ = deadline => {
            tracing::warn!("shutdown grace of {}s elapsed with {} runs in flight", grace.as_secs(), d.runs_in_flight());
            Ok(())
        }
    };
    d.abandon_runs().await;
    d.stopped.cancel();
    // Upkeep saw the stop: let it finish the round it is in (bounded), so nothing it writes is
    // cut off and every task this daemon started has ended when `serve` returns (an in-process
    // restart can open the same embedded stores again at once).
    maintenance.finish(grace.max(ABANDON_WAIT)).await;
    out
}

/// The operations listener (`server.ops_port`): `/healthz`, `/readyz` and `/metrics` only, on
/// connection limits of its own (32 connections, 8 per client address, heads within 2 s), so
/// probes and scrapes are answered whatever clients do to the main port. Serves until
/// `shutdown` resolves (it goes on answering while the main port drains).
pub async fn serve_operations(
    listener: tokio::net::TcpListener,
    d: Arc<Daemon>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use super::ops::{healthz, metrics_text, readyz};
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .fallback(|| async {
            ApiError::not_found("the operations listener serves /healthz, /readyz and /metrics only")
        })
        .layer(middleware::map_response(json_errors))
        .with_state(d);
    let limits = super::listen::ConnLimits {
        header_read: Duration::from_secs(2),
        header_read_busy: Duration::from_millis(500),
        body_read: Duration::from_secs(2),
        write: Duration::from_secs(5),
        max_connections: 32,
        per_peer: 8,
    };
    super::listen::serve_connections(listener, app, limits, Arc::new(|| {}), shutdown).await
}

/// Time limit and metrics for every request.
pub(super) async fn observe(State(d): State<Arc<Daemon>>, req: Request, next: Next) -> Response {
    let route =
        req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    let limit = Duration::from_millis(d.settings().server.request_timeout_ms.max(1));
    let r = match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            format!("the request took longer than {} ms", limit.as_millis()),
        )
        .into_response(),
    };
    d.metrics.request(&method, &route, r.status().as_u16());
    r
}

/// Every error answer keeps the `{message, code, type}` contract: one that a layer or an extractor
/// made as plain text (a rejected body, a missing content type, an oversized body) is rewritten
/// as JSON with its status, its headers (`Allow`, `Retry-After`) and its text as the message.
pub(super) async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().chars().take(300).collect::<String>())
        .unwrap_or_default();
    let message = if text.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { text };
    let code = match status.as_u16() {
        400 | 422 => "invalid_request",
        404 => "not_found",
        405 => "method_not_allowed",
        406 => "not_acceptable",
        413 => "payload_too_large",
        415 => "unsupported_media_type",
        _ if status.is_server_error() => "internal",
        _ => "error",
    };
    let mut out = ApiError::new(status, code, message).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}
