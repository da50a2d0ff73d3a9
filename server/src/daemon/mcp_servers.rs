//! `/v1/mcp-servers`: MCP servers whose tools become APIs.

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewMcpServer {
    pub(super) name: String,
    pub(super) url: String,
}

/// `POST /v1/mcp-servers {name, url}` (administrators): connect to a Streamable HTTP MCP server
/// (its URL through the SSRF guard), import its tools as APIs (category `mcp`), re-index. stdio
/// servers (a command to run) come only from operators: `toolgraph tools add-mcp --command`.
#[cfg(feature = "mcp")]
pub(super) async fn add_mcp_server(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, ApiJson(b): ApiJson<NewMcpServer>) -> Result<(StatusCode, Json<Value>), ApiError> {
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
    Ok((StatusCode::CREATED, Json(json!(imported))))
}

#[cfg(not(feature = "mcp"))]
pub(super) async fn add_mcp_server(Extension(_caller): Extension<Caller>, ApiJson(_b): ApiJson<NewMcpServer>) -> Result<(StatusCode, Json<Value>), ApiError> {
    Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "not_built", "this toolgraph was built without the `mcp` feature"))
}

/// `GET /v1/mcp-servers` (administrators): each server's transport, connection and last error.
pub(super) async fn mcp_servers(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "MCP servers")?;
    #[cfg(feature = "mcp")]
    let list = d.mcp.status();
    #[cfg(not(feature = "mcp"))]
    let list: Vec<Value> = {
        let _ = &d;
        Vec::new()
    };
    Ok(Json(json!({"servers": list})))
}
