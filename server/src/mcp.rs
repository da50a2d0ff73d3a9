//! MCP servers as a tool source (rmcp client): connect over stdio (a child process) or Streamable
//! HTTP, `tools/list` → one API node per tool (category `mcp`, tool = the server's name, API = the
//! tool's name, parameters from `inputSchema`, output fields from `outputSchema`), and the
//! executor's `mcp://SERVER/TOOL` calls → `tools/call`. Connections are made on demand and made
//! again after a failure (with backoff); `notifications/tools/list_changed` is reported so that
//! the graph follows the server (new tools admitted, removed ones invalidated).

use crate::state::{now_ms, StateStore};
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgraph_engine::exec::{RemoteError, RemoteTools, MCP_SCHEME};
use toolgraph_engine::graph::ApiUpsert;
use toolgraph_schema::{tool_id, ApiDoc, ParamDoc};

/// The category of every MCP tool.
pub const MCP_CATEGORY: &str = "mcp";

pub use crate::state::McpServer;

/// Split a command line into words (double and single quotes group; no shell is involved).
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err("the command has an unclosed quote".into());
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    if out.is_empty() {
        return Err("the command is empty".into());
    }
    Ok(out)
}

/// Reports `notifications/tools/list_changed` of one server.
#[derive(Clone)]
struct Listener {
    server: String,
    changed: tokio::sync::mpsc::UnboundedSender<String>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "MCP server: its tool list changed");
        let _ = self.changed.send(self.server.clone());
    }
}

type Client = RunningService<RoleClient, Listener>;

struct Conn {
    def: McpServer,
    client: Option<Arc<Client>>,
    /// Last failure: when and why (the next attempt waits `backoff`).
    failed: Option<(Instant, String)>,
    backoff: Duration,
    connected_ms: Option<i64>,
}

/// Every connected MCP server: the executor's remote port, supervised connections.
pub struct McpHub {
    conns: Mutex<BTreeMap<String, Conn>>,
    changed_tx: tokio::sync::mpsc::UnboundedSender<String>,
    changed_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    /// URLs are checked against the executor's SSRF guard before connecting.
    guard: Option<toolgraph_engine::exec::Executor>,
}

const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The environment a stdio MCP server inherits (nothing else of toolgraph's).
const CHILD_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "NODE_PATH", "SYSTEMROOT"];

/// rmcp's HTTP client (reqwest 0.13) brings rustls without a crypto provider: use ring, as the
/// rest of toolgraph does.
fn crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl McpHub {
    pub fn new(servers: Vec<McpServer>, guard: Option<toolgraph_engine::exec::Executor>) -> Arc<Self> {
        crypto_provider();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let conns = servers
            .into_iter()
            .map(|d| {
                (
                    d.name.clone(),
                    Conn {
                        def: d,
                        client: None,
                        failed: None,
                        backoff: Duration::from_millis(500),
                        connected_ms: None,
                    },
                )
            })
            .collect();
        Arc::new(McpHub { conns: Mutex::new(conns), changed_tx: tx, changed_rx: Mutex::new(Some(rx)), guard })
    }

    /// The hub of every server the state store knows.
    pub async fn from_state(
        state: &StateStore,
        guard: Option<toolgraph_engine::exec::Executor>,
    ) -> Result<Arc<Self>, String> {
        Ok(Self::new(state.mcp_servers().await.map_err(|e| e.0)?, guard))
    }

    /// Names of servers whose tool list changed (taken once, by whoever follows them).
    pub fn take_changes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.changed_rx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    pub fn add(&self, def: McpServer) {
        let mut c = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        c.insert(
            def.name.clone(),
            Conn { def, client: None, failed: None, backoff: Duration::from_millis(500), connected_ms: None },
        );
    }

    pub fn remove(&self, name: &str) {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    pub fn is_empty(&self) -> bool {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// Each server: transport, connected or not, the last error.
    pub fn status(&self) -> Vec<Value> {
        let c = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        c.values()
            .map(|x| {
                let up = x.client.as_ref().is_some_and(|c| !c.is_closed());
                json!({"name": x.def.name, "transport": x.def.transport(), "url": x.def.url, "connected": up, "connected_ms": x.connected_ms,
                       "last_error": x.failed.as_ref().map(|(_, e)| e.clone())})
            })
            .collect()
    }

    /// The live client of `name`, connecting (again) when there is none; a server that failed
    /// waits out its backoff before the next attempt.
    async fn client(&self, name: &str) -> Result<Arc<Client>, RemoteError> {
        let def = {
            let mut c = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            let conn =
                c.get_mut(name).ok_or_else(|| RemoteError::Unknown(format!("no MCP server `{name}` is configured")))?;
            if let Some(cl) = conn.client.as_ref().filter(|c| !c.is_closed()) {
                return Ok(cl.clone());
            }
            conn.client = None;
            if let Some((at, why)) = &conn.failed {
                if at.elapsed() < conn.backoff {
                    return Err(RemoteError::Transient(format!(
                        "MCP server `{name}` is down ({why}); next attempt in {} ms",
                        (conn.backoff - at.elapsed()).as_millis()
                    )));
                }
            }
            conn.def.clone()
        };
        let made = self.connect(&def).await;
        let mut c = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let conn = c.get_mut(name).ok_or_else(|| RemoteError::Unknown(format!("MCP server `{name}` was removed")))?;
        match made {
            Ok(cl) => {
                let cl = Arc::new(cl);
                conn.client = Some(cl.clone());
                conn.failed = None;
                conn.backoff = Duration::from_millis(500);
                conn.connected_ms = Some(now_ms());
                tracing::info!(server = %name, transport = def.transport(), "MCP server connected");
                Ok(cl)
            }
            Err(e) => {
                tracing::warn!(server = %name, error = %e, "MCP server: cannot connect");
                conn.failed = Some((Instant::now(), e.clone()));
                conn.backoff = (conn.backoff * 2).min(MAX_BACKOFF);
                Err(RemoteError::Transient(format!("MCP server `{name}`: {e}")))
            }
        }
    }

    async fn connect(&self, def: &McpServer) -> Result<Client, String> {
        let listener = Listener { server: def.name.clone(), changed: self.changed_tx.clone() };
        let limit = Duration::from_secs(30);
        if let Some(line) = &def.command {
            let words = split_command(line)?;
            let cmd = tokio::process::Command::new(&words[0]).configure(|c| {
                c.args(&words[1..]);
                c.stderr(std::process::Stdio::null());
                c.kill_on_drop(true);
                // The server gets none of toolgraph's environment (its keys, database passwords):
                // only what a program needs to start.
                c.env_clear();
                for k in CHILD_ENV {
                    if let Some(v) = std::env::var_os(k) {
                        c.env(k, v);
                    }
                }
            });
            let transport = TokioChildProcess::new(cmd).map_err(|e| format!("cannot start `{}`: {e}", words[0]))?;
            tokio::time::timeout(limit, listener.serve(transport))
                .await
                .map_err(|_| "no answer to initialize within 30 s".to_string())?
                .map_err(|e| format!("initialize: {e}"))
        } else {
            let url = def.url.clone().unwrap_or_default();
            let parsed = reqwest::Url::parse(&url).map_err(|e| format!("url: {e}"))?;
            if let Some(g) = &self.guard {
                g.guard().check_url(&parsed).await.map_err(|e| format!("url refused: {e}"))?;
            }
            let transport = StreamableHttpClientTransport::from_uri(url);
            tokio::time::timeout(limit, listener.serve(transport))
                .await
                .map_err(|_| "no answer to initialize within 30 s".to_string())?
                .map_err(|e| format!("initialize: {e}"))
        }
    }

    /// `tools/list` of one server.
    pub async fn list_tools(&self, name: &str) -> Result<Vec<Tool>, String> {
        let client = self.client(name).await.map_err(|e| match e {
            RemoteError::Transient(m) | RemoteError::Failed(m) | RemoteError::Unknown(m) => m,
        })?;
        match client.list_all_tools().await {
            Ok(t) => Ok(t),
            Err(e) => {
                self.drop_client(name, &e.to_string());
                Err(format!("tools/list of `{name}`: {e}"))
            }
        }
    }

    fn drop_client(&self, name: &str, why: &str) {
        let mut c = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(conn) = c.get_mut(name) {
            conn.client = None;
            conn.failed = Some((Instant::now(), why.to_string()));
        }
    }
}

#[async_trait::async_trait]
impl RemoteTools for McpHub {
    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, RemoteError> {
        let client = self.client(server).await?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let result = match tokio::time::timeout(timeout, client.call_tool(params)).await {
            Err(_) => {
                return Err(RemoteError::Transient(format!(
                    "tools/call {tool} took longer than {} ms",
                    timeout.as_millis()
                )))
            }
            Ok(Err(rmcp::service::ServiceError::McpError(e))) => {
                return Err(RemoteError::Failed(format!("{tool}: {}", e.message)))
            }
            Ok(Err(e)) => {
                self.drop_client(server, &e.to_string());
                return Err(RemoteError::Transient(format!("tools/call {tool}: {e}")));
            }
            Ok(Ok(r)) => r,
        };
        let value = response_of(&result);
        if result.is_error == Some(true) {
            return Err(RemoteError::Failed(format!(
                "{tool} answered with an error: {}",
                value.to_string().chars().take(500).collect::<String>()
            )));
        }
        Ok(value)
    }
}

/// A `tools/call` result as the planner sees a response: the structured content when there is
/// one (with the text beside it), else the text (parsed when it is JSON).
pub fn response_of(r: &rmcp::model::CallToolResult) -> Value {
    let texts: Vec<String> = r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
    let text = texts.join("\n");
    match &r.structured_content {
        Some(Value::Object(m)) => {
            let mut m = m.clone();
            if !text.is_empty() && !m.contains_key("text") {
                m.insert("text".into(), Value::String(text));
            }
            Value::Object(m)
        }
        Some(v) => json!({"result": v, "text": text}),
        None => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => Value::Object(m),
            Ok(v @ Value::Array(_)) => json!({"result": v}),
            _ => json!({"text": text, "content_types": r.content.len()}),
        },
    }
}

/// The API node of one MCP tool of `server`.
pub fn api_of(server: &str, tool: &Tool) -> ApiUpsert {
    let schema = Value::Object((*tool.input_schema).clone());
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let mut params = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            params.push(ParamDoc {
                name: name.clone(),
                ty: toolgraph_schema::schema_type(p),
                description: p
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .chars()
                    .take(1000)
                    .collect(),
                required: required.contains(name),
                default: p.get("default").cloned(),
            });
        }
    }
    let output_fields = tool
        .output_schema
        .as_ref()
        .map(|o| toolgraph_schema::output_fields(&Value::Object((**o).clone())))
        .unwrap_or_default();
    let name = tool.name.to_string();
    let description =
        tool.description.as_deref().map(str::to_string).or_else(|| tool.title.clone()).unwrap_or_default();
    ApiUpsert::from_doc(&ApiDoc {
        category: MCP_CATEGORY.to_string(),
        tool: server.to_string(),
        url: format!("{MCP_SCHEME}{server}/{name}"),
        api: name,
        tool_description: format!("MCP server {server}"),
        description,
        method: "MCP".into(),
        params,
        output_fields,
    })
}

/// What an import did.
#[derive(Debug, Default, Clone, Serialize, utoipa::ToSchema)]
pub struct Imported {
    pub server: String,
    pub admitted: Vec<String>,
    /// Tools the server no longer lists: invalidated in the graph.
    pub invalidated: Vec<String>,
}

/// List `server`'s tools and write them to the graph as APIs; tools of that server the graph
/// has and the server no longer lists are invalidated, listed ones made active. The caller
/// re-indexes (and reloads its engine).
pub async fn import(hub: &McpHub, server: &str, store: &dyn toolgraph_engine::GraphStore) -> Result<Imported, String> {
    let tools = hub.list_tools(server).await?;
    let ups: Vec<ApiUpsert> = tools.iter().map(|t| api_of(server, t)).collect();
    store.upsert_apis(&ups).await.map_err(|e| e.to_string())?;
    let listed: HashMap<&str, ()> = ups.iter().map(|u| (u.id.as_str(), ())).collect();
    let snapshot = store.snapshot().await.map_err(|e| e.to_string())?;
    let tid = tool_id(MCP_CATEGORY, server);
    let since = toolgraph_engine::run::now_rfc3339();
    let mut out = Imported { server: server.to_string(), ..Default::default() };
    for a in snapshot.apis.values().filter(|a| a.tool == tid || a.url.starts_with(&format!("{MCP_SCHEME}{server}/"))) {
        let (status, reason) = if listed.contains_key(a.id.as_str()) {
            (toolgraph_schema::STATUS_ACTIVE, "listed by its MCP server")
        } else {
            (toolgraph_schema::STATUS_INVALID, "its MCP server no longer lists it")
        };
        if a.status != status {
            store
                .set_api_status(&toolgraph_schema::StatusChange {
                    id: a.id.clone(),
                    status: status.into(),
                    reason: reason.into(),
                    since: since.clone(),
                    probe: None,
                })
                .await
                .map_err(|e| e.to_string())?;
        }
        if status == toolgraph_schema::STATUS_INVALID {
            out.invalidated.push(a.id.clone());
        }
    }
    out.admitted = ups.into_iter().map(|u| u.id).collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_without_a_shell() {
        assert_eq!(split_command("node 'a b/index.js' stdio").unwrap(), vec!["node", "a b/index.js", "stdio"]);
        assert_eq!(split_command(r#"python3 -m "my server" """#).unwrap(), vec!["python3", "-m", "my server", ""]);
        assert!(split_command("node 'oops").is_err());
        assert!(split_command("   ").is_err());
    }

    #[test]
    fn servers_are_checked() {
        let ok = McpServer { name: "everything".into(), command: Some("node x.js".into()), url: None };
        assert!(ok.check().is_ok());
        assert!(McpServer { name: "bad name".into(), ..ok.clone() }.check().is_err());
        assert!(McpServer { url: Some("http://x/mcp".into()), ..ok.clone() }.check().is_err(), "both");
        assert!(McpServer { command: None, url: Some("file:///etc/passwd".into()), ..ok }.check().is_err());
    }

    #[test]
    fn tools_become_api_nodes_with_typed_parameters() {
        let tool: Tool = serde_json::from_value(json!({
            "name": "get-sum", "description": "Adds two numbers",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number", "description": "First"}, "b": {"type": ["number", "null"]}}, "required": ["a"]},
            "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}}
        }))
        .unwrap();
        let a = api_of("everything", &tool);
        assert_eq!(a.id, "mcp/everything/get_sum");
        assert_eq!(a.url, "mcp://everything/get-sum");
        assert_eq!(a.required, vec!["a"]);
        let params: Vec<ParamDoc> = serde_json::from_str(&a.parameters).unwrap();
        assert_eq!(
            params.iter().map(|p| (p.name.as_str(), p.ty.as_str(), p.required)).collect::<Vec<_>>(),
            vec![("a", "number", true), ("b", "number", false)]
        );
        assert_eq!(a.output_fields, vec!["sum"]);
    }

    #[test]
    fn structured_content_wins_and_text_json_is_parsed() {
        let r: rmcp::model::CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": "{\"x\": 1}"}]})).unwrap();
        assert_eq!(response_of(&r), json!({"x": 1}));
        let r: rmcp::model::CallToolResult = serde_json::from_value(
            json!({"content": [{"type": "text", "text": "Echo: hi"}], "structuredContent": {"sum": 3}}),
        )
        .unwrap();
        assert_eq!(response_of(&r), json!({"sum": 3, "text": "Echo: hi"}));
        let r: rmcp::model::CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": "Echo: hi"}]})).unwrap();
        assert_eq!(response_of(&r)["text"], "Echo: hi");
    }
}
