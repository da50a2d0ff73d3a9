//! `/v1/mcp-servers`: MCP servers whose tools become APIs.
use super::auth::require_admin;
use super::error::{ApiError, ApiJson};
use super::shared::Daemon;
use crate::state::Caller;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewMcpServer {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub(super) name: String,
    /// Its Streamable HTTP endpoint (through the SSRF guard).
    pub(super) url: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct McpServers {
    /// Each server: name, transport, url, connected, connected_ms, last_error.
    servers: Vec<Value>,
}

#[cfg(feature = "mcp")]
/// Import a Streamable HTTP MCP server's tools as APIs (administrators).
///
/// Connects to the server (its URL through the SSRF guard), imports its tools as APIs (category
/// `mcp`, tool = its name) and re-indexes. stdio servers (a command to run) come only from
/// operators: `toolgraph tools add-mcp --command`.
#[utoipa::path(post, path = "/v1/mcp-servers", tag = "tools", request_body = NewMcpServer,
    responses((status = 201, description = "imported: the server, the admitted APIs and the plans invalidated", body = crate::mcp::Imported),
        (status = 422, description = "cannot connect or list its tools (`mcp_unreachable`)", body = super::error::ErrorBody)))]
pub(super) async fn add_mcp_server(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiJson(b): ApiJson<NewMcpServer>,
) -> Result<(StatusCode, Json<crate::mcp::Imported>), ApiError> {
    require_admin(&caller, "adding MCP servers")?;
    let def = crate::mcp::McpServer { name: b.name, command: None, url: Some(b.url) };
    def.check().map_err(ApiError::invalid)?;
    let _admin = d.admin.lock().await;
    let known = d.mcp.status().iter().any(|s| s["name"] == def.name.as_str());
    d.mcp.add(def.clone());
    let imported = match crate::mcp::import(&d.mcp, &def.name, d.stack.store.as_ref()).await {
        Ok(i) => i,
        Err(e) => {
            if !known {
                d.mcp.remove(&def.name);
            }
            // The guard's refusal is ours to show; anything else came from the server or the MCP
            // library (response bodies, internals): logged, not echoed.
            if let Some(i) = e.find("url refused:") {
                return Err(ApiError::unprocessable("mcp_unreachable", e[i..].to_string()));
            }
            let r = super::error::reference();
            tracing::warn!(reference = %r, server = %def.name, error = %e, "importing an MCP server failed");
            return Err(ApiError::unprocessable("mcp_unreachable", format!("`{}` did not answer as an MCP server (Streamable HTTP: initialize, then tools/list); reference {r} in the daemon's log", def.name)));
        }
    };
    d.state.put_mcp_server(&def, &caller.name).await?;
    d.reload().await?;
    d.audit(&caller, "mcp.add", &def.name, json!({"url": def.url, "tools": imported.admitted.len()})).await;
    Ok((StatusCode::CREATED, Json(imported)))
}

#[cfg(not(feature = "mcp"))]
/// Import a Streamable HTTP MCP server's tools as APIs: not in this build.
#[utoipa::path(post, path = "/v1/mcp-servers", tag = "tools", request_body = NewMcpServer,
    responses((status = 501, description = "built without the `mcp` feature (`not_built`)", body = super::error::ErrorBody)))]
pub(super) async fn add_mcp_server(
    Extension(_caller): Extension<Caller>,
    ApiJson(_b): ApiJson<NewMcpServer>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "not_built", "this toolgraph was built without the `mcp` feature"))
}

/// MCP servers whose tools are APIs: transport, connected, last error (administrators).
#[utoipa::path(get, path = "/v1/mcp-servers", tag = "tools", responses((status = 200, description = "the servers", body = McpServers)))]
pub(super) async fn mcp_servers(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<McpServers>, ApiError> {
    require_admin(&caller, "MCP servers")?;
    #[cfg(feature = "mcp")]
    let list = d.mcp.status();
    #[cfg(not(feature = "mcp"))]
    let list: Vec<Value> = {
        let _ = &d;
        Vec::new()
    };
    Ok(Json(McpServers { servers: list }))
}
