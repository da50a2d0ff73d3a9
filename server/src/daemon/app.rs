//! The HTTP application: the `/v1` routes, the router with its layers, `serve` with its drain.
use super::error::ApiError;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::Router;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::accounts;
use super::approvals;
use super::auth::authorize;
use super::console;
use super::cypher::__path_cypher;
use super::cypher::cypher;
use super::history;
use super::mcp_servers::__path_add_mcp_server;
use super::mcp_servers::__path_mcp_servers;
use super::mcp_servers::add_mcp_server;
use super::mcp_servers::mcp_servers;
use super::openapi;
use super::openapi_import;
use super::ops::__path_healthz;
use super::ops::__path_list_models;
use super::ops::__path_metrics_text;
use super::ops::__path_readyz;
use super::ops::healthz;
use super::ops::list_models;
use super::ops::metrics_text;
use super::ops::readyz;
use super::runs::__path_get_run;
use super::runs::__path_orchestrate;
use super::runs::get_run;
use super::runs::orchestrate;
use super::sessions::__path_create_session;
use super::sessions::__path_delete_session;
use super::sessions::__path_get_session;
use super::sessions::__path_list_sessions;
use super::sessions::create_session;
use super::sessions::delete_session;
use super::sessions::get_session;
use super::sessions::list_sessions;
use super::tools;
use super::upkeep::maintain;
use super::upkeep::AbortOnDrop;
use super::upkeep::ABANDON_WAIT;
use super::views;
use super::Daemon;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The `/v1` endpoints, without authentication: each request must carry its [`Caller`] (and a
/// [`console::ConsoleLogin`]) in its extensions. [`router`] puts `authorize` in front; the MCP
/// server calls them in-process for the caller it has authenticated.
pub(crate) fn api_routes() -> Router<Arc<Daemon>> {
    documented_api().split_for_parts().0
}

/// The `/v1` endpoints with their OpenAPI operations, taken from each handler's
/// `#[utoipa::path]`: a route and its documentation are registered in one call, so neither can
/// exist without the other. The two wildcard routes (ids with `/` in them) are axum routes whose
/// operations [`super::openapi`] adds (`WildcardRoutes`); a test checks they agree.
pub(super) fn documented_api() -> OpenApiRouter<Arc<Daemon>> {
    OpenApiRouter::new()
        .routes(routes!(orchestrate))
        .routes(routes!(list_models))
        .routes(routes!(accounts::me))
        .routes(routes!(history::list_runs))
        .routes(routes!(get_run))
        .routes(routes!(history::rerun))
        .routes(routes!(approvals::approve))
        .routes(routes!(approvals::reject))
        .routes(routes!(create_session, list_sessions))
        .routes(routes!(get_session, delete_session))
        .routes(routes!(history::save_chain, history::list_chains))
        .routes(routes!(history::execute_chain))
        .routes(routes!(history::get_chain, history::delete_chain))
        .routes(routes!(tools::register, views::list_apis))
        .routes(routes!(tools::search))
        .routes(routes!(openapi_import::import_openapi))
        .route("/v1/tools/{*id}", get(tools::get_tool).patch(tools::patch_tool))
        .routes(routes!(cypher))
        .routes(routes!(accounts::list_users, accounts::add_user))
        .routes(routes!(accounts::list_keys, accounts::add_key))
        .routes(routes!(accounts::revoke_key))
        .routes(routes!(accounts::list_credentials))
        .route("/v1/credentials/{*scope}", put(accounts::put_credentials).delete(accounts::delete_credentials))
        .routes(routes!(accounts::audit_log))
        .routes(routes!(mcp_servers, add_mcp_server))
        .routes(routes!(views::categories))
        .routes(routes!(views::neighbourhood))
        .routes(routes!(views::list_memory))
        .routes(routes!(views::delete_memory))
        .routes(routes!(views::settings))
        .routes(routes!(views::check_chain))
}

/// The endpoints outside `/v1`'s authentication: operations, this document, the console and its
/// login. (`/assets/{*path}`, the console's files, and `/mcp`, MCP's own protocol, are not part of
/// the HTTP API's document.)
pub(super) fn documented_public() -> OpenApiRouter<Arc<Daemon>> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics_text))
        .routes(routes!(openapi::document))
        .routes(routes!(console::index))
        .routes(routes!(console::login))
        .routes(routes!(console::logout))
}

/// The router with every endpoint and layer.
pub fn router(d: Arc<Daemon>) -> Router {
    let s = d.settings().server.clone();
    let v1 = api_routes().route_layer(middleware::from_fn_with_state(d.clone(), authorize));
    #[cfg(feature = "mcp")]
    let v1 = v1.merge(
        Router::new()
            .route_service("/mcp", super::mcp_serve::http_service(d.clone()))
            // Inside `authorize`: the caller is known when the session is checked.
            .route_layer(middleware::from_fn_with_state(
                super::mcp_sessions::SessionOwners::default(),
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
    // Upkeep saw the stop: let it finish the round it is in (bounded), so nothing it writes is
    // cut off and every task this daemon started has ended when `serve` returns (an in-process
    // restart can open the same embedded stores again at once).
    maintenance.finish(grace.max(ABANDON_WAIT)).await;
    out
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
