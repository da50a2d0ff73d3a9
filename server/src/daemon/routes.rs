//! The daemon's route table: every endpoint with its OpenAPI operation, registered together, and
//! the document built from it (`GET /openapi.json`, completed by [`super::openapi`]).

use super::accounts;
use super::approvals;
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
use super::shared::Daemon;
use super::tools;
use super::views;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::Router;
use serde_json::Value;
use std::sync::{Arc, OnceLock};
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
        .routes(routes!(document))
        .routes(routes!(console::index))
        .routes(routes!(console::login))
        .routes(routes!(console::logout))
}

/// The document, built once from the route table.
pub(super) fn spec() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| openapi::build(documented_public().merge(documented_api()).split_for_parts().1))
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", security(()), responses((status = 200, description = "OpenAPI 3.1", body = Object)))]
pub(super) async fn document() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(spec()).unwrap_or_default()).into_response()
}
