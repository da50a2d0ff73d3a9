//! The HTTP application: the `/v1` routes, the router with its layers, `serve` with its drain.

use super::*;

/// The `/v1` endpoints, without authentication: each request must carry its [`Caller`] (and a
/// [`console::ConsoleLogin`]) in its extensions. [`router`] puts `authorize` in front; the MCP
/// server calls them in-process for the caller it has authenticated.
pub(crate) fn api_routes() -> Router<Arc<Daemon>> {
    Router::new()
        .route("/v1/orchestrate", post(orchestrate))
        .route("/v1/models", get(list_models))
        .route("/v1/me", get(accounts::me))
        .route("/v1/runs", get(history::list_runs))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/rerun", post(history::rerun))
        .route("/v1/runs/{id}/approve", post(approvals::approve))
        .route("/v1/runs/{id}/reject", post(approvals::reject))
        .route("/v1/sessions", post(create_session).get(list_sessions))
        .route("/v1/sessions/{id}", get(get_session).delete(delete_session))
        .route("/v1/chains", post(history::save_chain).get(history::list_chains))
        .route("/v1/chains/execute", post(history::execute_chain))
        .route("/v1/chains/{id}", get(history::get_chain).delete(history::delete_chain))
        .route("/v1/tools", post(tools::register).get(console::list_apis))
        .route("/v1/tools/search", get(tools::search))
        .route("/v1/tools/import-openapi", post(tools::import_openapi))
        .route("/v1/tools/{*id}", get(tools::get_tool).patch(tools::patch_tool))
        .route("/v1/graph/cypher", post(cypher))
        .route("/v1/users", get(accounts::list_users).post(accounts::add_user))
        .route("/v1/users/{id}/keys", get(accounts::list_keys).post(accounts::add_key))
        .route("/v1/keys/{id}", axum::routing::delete(accounts::revoke_key))
        .route("/v1/credentials", get(accounts::list_credentials))
        .route("/v1/credentials/{*scope}", put(accounts::put_credentials).delete(accounts::delete_credentials))
        .route("/v1/audit", get(accounts::audit_log))
        .route("/v1/mcp-servers", get(mcp_servers).post(add_mcp_server))
        .route("/v1/categories", get(console::categories))
        .route("/v1/graph/neighborhood", get(console::neighbourhood))
        .route("/v1/memory", get(console::list_memory))
        .route("/v1/memory/{id}", axum::routing::delete(console::delete_memory))
        .route("/v1/settings", get(console::settings))
        .route("/v1/chains/check", post(console::check_chain))
}

/// The router with every endpoint and layer.
pub fn router(d: Arc<Daemon>) -> Router {
    let s = d.settings().server.clone();
    let v1 = api_routes().route_layer(middleware::from_fn_with_state(d.clone(), authorize));
    #[cfg(feature = "mcp")]
    let v1 = v1.merge(Router::new().route_service("/mcp", super::mcp_serve::http_service(d.clone())).route_layer(middleware::from_fn_with_state(d.clone(), authorize)));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/openapi.json", get(openapi::document))
        .route("/", get(console::index))
        .route("/assets/{*path}", get(console::asset))
        .route("/v1/login", post(console::login))
        .route("/v1/logout", post(console::logout))
        .merge(v1)
        .fallback(|| async { ApiError::not_found("no such endpoint (see GET /openapi.json)") })
        .method_not_allowed_fallback(|| async { ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this endpoint does not take that method (see GET /openapi.json)") })
        .layer(middleware::from_fn_with_state(d.clone(), observe))
        .layer(middleware::map_response(json_errors))
        .layer(DefaultBodyLimit::max(s.max_body_bytes))
        .with_state(d)
}

/// Serve until `shutdown` resolves, then drain: in-flight requests (and streamed runs) finish
/// within `server.shutdown_grace_s`.
pub async fn serve(listener: tokio::net::TcpListener, d: Arc<Daemon>, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
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
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    let limit = Duration::from_millis(d.settings().server.request_timeout_ms.max(1));
    let r = match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::new(StatusCode::GATEWAY_TIMEOUT, "timeout", format!("the request took longer than {} ms", limit.as_millis())).into_response(),
    };
    d.metrics.request(&method, &route, r.status().as_u16());
    r
}

/// Every error answer keeps the `{message, code, type}` contract: one that a layer or an extractor
/// made as plain text (a rejected body, a missing content type, an oversized body) is rewritten
/// as JSON with its status, its headers (`Allow`, `Retry-After`) and its text as the message.
pub(super) async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let json = resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.map(|b| String::from_utf8_lossy(&b).trim().chars().take(300).collect::<String>()).unwrap_or_default();
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
