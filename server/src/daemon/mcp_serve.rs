//! toolgraph as an MCP server: `toolgraph mcp` (stdio, the local operator) and `/mcp` on the
//! daemon (Streamable HTTP behind the same authentication as `/v1`). Clients get five tools, not
//! the APIs: `search_tools`, `orchestrate`, `execute_chain`, `get_run`, `graph_neighbors`, and the
//! caller's runs as resources (`toolgraph://runs/{run_id}`).
//!
//! Every tool is the daemon's own endpoint called in-process for the authenticated caller, so
//! limits, ownership and validation are the API's. `orchestrate` streams the run: each trace step
//! is a progress notification. A run that stops at `needs_input` asks the user through
//! elicitation: an `input_required` result (protocol 2026-07-28, multi round-trip: the client
//! retries with the answers and the session as `requestState`) or, for clients of earlier
//! versions, an `elicitation/create` request; a client without elicitation gets the structured
//! `needs_input` result to answer with `given`.

use super::console::ConsoleLogin;
use super::mcp_tools::tools;
use super::routes::api_routes;
use super::shared::Daemon;
use super::upkeep::Upkeep;
use crate::state::{Caller, Role};
use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult,
    ElicitationAction, InputRequest, InputRequests, InputRequiredResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio_stream::StreamExt;
use tower::ServiceExt as _;

/// The key of the elicitation in an `input_required` result.
const NEEDS_INPUT_KEY: &str = "needs_input";
/// Legacy clients: how many times one call asks again (each answer may reveal another gap).
const MAX_ELICITATIONS: usize = 3;
/// The most a tool result carries (a run with its trace is well under this).
const MAX_BODY_BYTES: usize = 16 << 20;
/// Runs listed as resources.
const RESOURCE_RUNS: usize = 50;
const RUN_SCHEME: &str = "toolgraph://runs/";

/// The MCP server over one daemon.
#[derive(Clone)]
pub struct ToolgraphMcp {
    api: Router,
    /// stdio: the local operator (the process owner), who is the administrator as in the CLI.
    /// HTTP: `None`, the caller `authorize` put in the request.
    local: Option<Caller>,
}

/// `/mcp` on the daemon (the router puts `authorize` in front of it).
pub fn http_service(
    d: Arc<Daemon>,
    sessions: Arc<LocalSessionManager>,
) -> StreamableHttpService<ToolgraphMcp, LocalSessionManager> {
    let s = &d.settings().server;
    let mut config = StreamableHttpServerConfig::default();
    if s.mcp_allowed_hosts.iter().any(|h| h == "*") {
        config = config.disable_allowed_hosts();
    } else {
        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into(), s.host.clone()];
        hosts.extend(s.mcp_allowed_hosts.iter().cloned());
        config = config.with_allowed_hosts(hosts);
    }
    // Sessions end with the daemon (each holds it; a session's idle limit is minutes).
    config.cancellation_token = d.stopped.child_token();
    let server = ToolgraphMcp::new(d, None);
    StreamableHttpService::new(move || Ok(server.clone()), sessions, config)
}

/// `toolgraph mcp`: serve on stdin/stdout until the client closes them, with the daemon's upkeep
/// (the graph the runs taught is reloaded, paused runs resumed, retention kept, imported MCP
/// servers followed) as long as it serves.
pub async fn serve_stdio(d: Arc<Daemon>) -> Result<(), String> {
    let local = Caller { user_id: "local".into(), name: "local".into(), role: Role::Admin };
    let upkeep = Upkeep::start(d.clone());
    let served = async {
        let running = ToolgraphMcp::new(d.clone(), Some(local))
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| format!("MCP over stdio: {e}"))?;
        running.waiting().await.map_err(|e| format!("MCP over stdio: {e}"))?;
        Ok(())
    }
    .await;
    upkeep.stop(&d).await;
    served
}

/// What an API call answered: its JSON body, or the error with its HTTP status.
type ApiAnswer = Result<Value, (StatusCode, Value)>;

impl ToolgraphMcp {
    pub fn new(d: Arc<Daemon>, local: Option<Caller>) -> Self {
        ToolgraphMcp { api: api_routes().with_state(d), local }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
        if let Some(c) = &self.local {
            return Ok(c.clone());
        }
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| McpError::internal_error("the request reached MCP without an authenticated caller", None))
    }

    async fn call(
        &self,
        caller: &Caller,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> Result<axum::response::Response, McpError> {
        let mut b = Request::builder().method(method).uri(uri);
        if body.is_some() {
            b = b.header(header::CONTENT_TYPE, "application/json");
        }
        let mut req = b
            .body(body.map(|v| Body::from(v.to_string())).unwrap_or_else(Body::empty))
            .map_err(|e| McpError::internal_error(format!("request: {e}"), None))?;
        req.extensions_mut().insert(caller.clone());
        req.extensions_mut().insert(ConsoleLogin::default());
        match self.api.clone().oneshot(req).await {
            Ok(r) => Ok(r),
            Err(never) => match never {},
        }
    }

    async fn json(
        &self,
        caller: &Caller,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> Result<ApiAnswer, McpError> {
        let r = self.call(caller, method, uri, body).await?;
        let status = r.status();
        let bytes = axum::body::to_bytes(r.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|e| McpError::internal_error(format!("reading the answer: {e}"), None))?;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(
            |_| json!({"message": String::from_utf8_lossy(&bytes).chars().take(500).collect::<String>()}),
        );
        Ok(if status.is_success() { Ok(v) } else { Err((status, v)) })
    }

    /// `orchestrate` and `execute_chain`: the run streamed (each step a progress notification),
    /// its result at the end.
    async fn run_streamed(
        &self,
        caller: &Caller,
        uri: &str,
        body: Value,
        ctx: &RequestContext<RoleServer>,
        progress: &mut f64,
    ) -> Result<ApiAnswer, McpError> {
        let r = self.call(caller, Method::POST, uri, Some(body)).await?;
        let status = r.status();
        let is_sse = r
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let bytes = axum::body::to_bytes(r.into_body(), MAX_BODY_BYTES)
                .await
                .map_err(|e| McpError::internal_error(format!("reading the answer: {e}"), None))?;
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Ok(if status.is_success() { Ok(v) } else { Err((status, v)) });
        }
        let token = ctx.meta.get_progress_token();
        let mut stream = r.into_body().into_data_stream();
        let mut buf = String::new();
        let mut last: Option<ApiAnswer> = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| McpError::internal_error(format!("the run's stream: {e}"), None))?;
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                let (kind, data) = sse_event(&event);
                match kind.as_str() {
                    "step" => {
                        if let Some(token) = &token {
                            *progress += 1.0;
                            let step: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                            let p =
                                ProgressNotificationParam::new(token.clone(), *progress).with_message(step_line(&step));
                            // A client that stopped listening does not stop the run.
                            let _ = ctx.peer.notify_progress(p).await;
                        }
                    }
                    "result" => last = Some(Ok(serde_json::from_str(&data).unwrap_or(Value::Null))),
                    "error" => {
                        last = Some(Err((
                            StatusCode::INTERNAL_SERVER_ERROR,
                            serde_json::from_str(&data).unwrap_or(Value::Null),
                        )))
                    }
                    _ => {}
                }
            }
        }
        last.ok_or_else(|| McpError::internal_error("the run ended without a result", None))
    }

    async fn orchestrate(
        &self,
        caller: &Caller,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        let text = str_arg(&args, "request")?
            .ok_or_else(|| McpError::invalid_params("`request` (what to do, in words) is required", None))?;
        let mut given = object_arg(&args, "given")?;
        let mut session_id = str_arg(&args, "session_id")?;
        // A retried call (2026-07-28): the answers to our elicitation, for the session in requestState.
        if let (Some(state), Some(responses)) = (&request.request_state, &request.input_responses) {
            let answer: Option<ElicitResult> =
                responses.get(NEEDS_INPUT_KEY).and_then(|v| serde_json::from_value(v.clone()).ok());
            match answer {
                Some(ElicitResult {
                    action: ElicitationAction::Accept, content: Some(Value::Object(values)), ..
                }) => {
                    given.extend(values);
                    session_id = Some(state.clone());
                }
                // Declined or cancelled: the run as it stopped.
                _ => {
                    return Ok(
                        tool_result(Ok(json!({"status": "needs_input", "session_id": state, "declined": true}))).into()
                    )
                }
            }
        }
        let mut progress = 0.0;
        let mut rounds = 0;
        loop {
            let mut body = json!({"request": text, "given": given, "stream": true});
            for k in ["planner", "model", "mode", "backward", "dry_run"] {
                if let Some(v) = args.get(k) {
                    body[k] = v.clone();
                }
            }
            if let Some(s) = &session_id {
                body["session_id"] = json!(s);
            }
            let answer = self.run_streamed(caller, "/v1/orchestrate", body, ctx, &mut progress).await?;
            let Ok(result) = &answer else { return Ok(tool_result(answer).into()) };
            if result["status"] != "needs_input" || !supports_elicitation(ctx) {
                return Ok(tool_result(answer).into());
            }
            let session = result["session_id"].as_str().unwrap_or_default().to_string();
            let (message, schema, kinds) = self.elicitation(caller, &result["needs_input"]).await?;
            let params: ElicitRequestParams =
                serde_json::from_value(json!({"mode": "form", "message": message, "requestedSchema": schema}))
                    .map_err(|e| McpError::internal_error(format!("elicitation: {e}"), None))?;
            if modern(ctx) {
                let elicit = serde_json::from_value(json!({"method": "elicitation/create", "params": params}))
                    .map_err(|e| McpError::internal_error(format!("elicitation: {e}"), None))?;
                let mut requests = InputRequests::new();
                requests.insert(NEEDS_INPUT_KEY.to_string(), InputRequest::Elicitation(elicit));
                return Ok(InputRequiredResult::new(Some(requests), Some(session)).into());
            }
            rounds += 1;
            if rounds > MAX_ELICITATIONS {
                return Ok(tool_result(answer).into());
            }
            let reply = match ctx.peer.create_elicitation(params).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "elicitation failed; returning needs_input");
                    return Ok(tool_result(answer).into());
                }
            };
            match (reply.action, reply.content) {
                (ElicitationAction::Accept, Some(Value::Object(values))) => {
                    given.extend(typed(values, &kinds));
                    session_id = Some(session);
                }
                _ => {
                    let mut r = result.clone();
                    r["declined"] = json!(true);
                    return Ok(tool_result(Ok(r)).into());
                }
            }
        }
    }

    /// The form for a `needs_input`: one field per missing parameter, typed from the API's docs.
    async fn elicitation(
        &self,
        caller: &Caller,
        needs: &Value,
    ) -> Result<(String, Value, Map<String, Value>), McpError> {
        let api = needs["api"].as_str().unwrap_or_default();
        let doc = self.json(caller, Method::GET, &format!("/v1/tools/{api}"), None).await?.unwrap_or(Value::Null);
        let mut properties = Map::new();
        let mut kinds = Map::new();
        for name in needs["missing"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let p = doc["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == name)
                .cloned()
                .unwrap_or(Value::Null);
            let kind = p["type"].as_str().unwrap_or("string").to_ascii_lowercase();
            let description: String = p["description"].as_str().unwrap_or_default().chars().take(300).collect();
            let (t, note) = match kind.as_str() {
                "integer" | "int" => ("integer", ""),
                "number" | "float" | "double" => ("number", ""),
                "boolean" | "bool" => ("boolean", ""),
                "array" | "object" | "list" | "dict" => ("string", " (JSON)"),
                _ => ("string", ""),
            };
            properties.insert(
                name.to_string(),
                json!({"type": t, "title": name, "description": format!("{description}{note}")}),
            );
            kinds.insert(name.to_string(), json!(kind));
        }
        let required: Vec<&String> = properties.keys().collect();
        let schema = json!({"type": "object", "properties": properties, "required": required});
        let message = needs["message"]
            .as_str()
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| format!("{api} needs more input"));
        Ok((message, schema, kinds))
    }

    async fn execute_chain(
        &self,
        caller: &Caller,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let mut body = json!({"stream": true, "given": object_arg(args, "given")?});
        match (args.get("steps"), str_arg(args, "chain_id")?) {
            (Some(steps), _) => body["steps"] = steps.clone(),
            (None, Some(id)) => body["chain_id"] = json!(id),
            (None, None) => {
                return Err(McpError::invalid_params(
                    "`steps` (a list of {api, arguments}) or `chain_id` (a saved chain) is required",
                    None,
                ))
            }
        }
        if let Some(r) = str_arg(args, "request")? {
            body["request"] = json!(r);
        }
        let mut progress = 0.0;
        Ok(tool_result(self.run_streamed(caller, "/v1/chains/execute", body, ctx, &mut progress).await?).into())
    }

    async fn search_tools(&self, caller: &Caller, args: &Map<String, Value>) -> Result<CallToolResult, McpError> {
        let q = str_arg(args, "query")?.ok_or_else(|| McpError::invalid_params("`query` is required", None))?;
        let mut uri = format!(
            "/v1/tools/search?q={}&k={}",
            enc(&q),
            args.get("k").and_then(Value::as_u64).unwrap_or(10).clamp(1, 50)
        );
        for k in ["category", "tool"] {
            if let Some(v) = str_arg(args, k)? {
                uri.push_str(&format!("&{k}={}", enc(&v)));
            }
        }
        let mut answer = self.json(caller, Method::GET, &uri, None).await?;
        if let Ok(v) = &mut answer {
            // The categories of the hits, best first: where to look next.
            let mut cats: Vec<(String, usize)> = Vec::new();
            for h in v["results"].as_array().into_iter().flatten() {
                let c = h["category"]
                    .as_str()
                    .or_else(|| h["id"].as_str().and_then(|id| id.split('/').next()))
                    .unwrap_or_default()
                    .to_string();
                match cats.iter_mut().find(|(n, _)| *n == c) {
                    Some((_, n)) => *n += 1,
                    None => cats.push((c, 1)),
                }
            }
            v["categories"] =
                json!(cats.into_iter().map(|(c, n)| json!({"category": c, "hits": n})).collect::<Vec<_>>());
        }
        Ok(tool_result(answer))
    }

    async fn dispatch(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&ctx)?;
        let args = request.arguments.clone().unwrap_or_default();
        match request.name.as_ref() {
            "search_tools" => Ok(self.search_tools(&caller, &args).await?.into()),
            "orchestrate" => self.orchestrate(&caller, &request, &ctx).await,
            "execute_chain" => self.execute_chain(&caller, &args, &ctx).await,
            "get_run" => {
                let id =
                    str_arg(&args, "run_id")?.ok_or_else(|| McpError::invalid_params("`run_id` is required", None))?;
                Ok(tool_result(self.json(&caller, Method::GET, &format!("/v1/runs/{}", enc(&id)), None).await?).into())
            }
            "graph_neighbors" => {
                let id = str_arg(&args, "id")?
                    .ok_or_else(|| McpError::invalid_params("`id` (an API id, or START) is required", None))?;
                let k = args.get("k").and_then(Value::as_u64).unwrap_or(10).clamp(1, 50);
                Ok(tool_result(
                    self.json(&caller, Method::GET, &format!("/v1/graph/neighborhood?id={}&k={k}", enc(&id)), None)
                        .await?,
                )
                .into())
            }
            other => Err(McpError::invalid_params(
                format!("no tool `{}` (tools/list names them)", other.chars().take(64).collect::<String>()),
                None,
            )),
        }
    }
}

impl ServerHandler for ToolgraphMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = serde_json::from_value(json!({"tools": {}, "resources": {}})).unwrap_or_default();
        ServerConfig::new(capabilities)
            .with_server_info(rmcp::model::Implementation::new("toolgraph", env!("CARGO_PKG_VERSION")))
            .with_instructions("toolgraph plans and executes chains of real API calls. Use search_tools to find APIs, orchestrate to have a request planned and executed (steps arrive as progress), execute_chain for a chain you write, get_run and graph_neighbors to inspect. Runs are resources (toolgraph://runs/{run_id}).")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.dispatch(request, ctx).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let caller = self.caller(&ctx)?;
        let runs = self
            .json(&caller, Method::GET, &format!("/v1/runs?limit={RESOURCE_RUNS}"), None)
            .await?
            .map_err(|(s, v)| McpError::internal_error(format!("listing runs: {s} {v}"), None))?;
        let resources: Vec<Value> = runs["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let id = r["run_id"].as_str().unwrap_or_default();
                let request: String = r["request"].as_str().unwrap_or_default().chars().take(80).collect();
                json!({"uri": format!("{RUN_SCHEME}{id}"), "name": id, "title": request, "description": format!("{} run: {request}", r["status"].as_str().unwrap_or("?")), "mimeType": "application/json"})
            })
            .collect();
        serde_json::from_value(json!({"resultType": "complete", "resources": resources}))
            .map_err(|e| McpError::internal_error(format!("resources: {e}"), None))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        serde_json::from_value(json!({"resultType": "complete", "resourceTemplates": [{"uriTemplate": format!("{RUN_SCHEME}{{run_id}}"), "name": "run", "description": "A run: request, status, answer, chain and trace", "mimeType": "application/json"}]}))
            .map_err(|e| McpError::internal_error(format!("resource templates: {e}"), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.caller(&ctx)?;
        let id =
            request.uri.strip_prefix(RUN_SCHEME).filter(|id| !id.is_empty() && id.len() <= 100).ok_or_else(|| {
                McpError::resource_not_found(
                    format!(
                        "no resource {} (runs are {RUN_SCHEME}RUN_ID)",
                        request.uri.chars().take(120).collect::<String>()
                    ),
                    None,
                )
            })?;
        match self.json(&caller, Method::GET, &format!("/v1/runs/{}", enc(id)), None).await? {
            Ok(run) => {
                let r: ReadResourceResult = serde_json::from_value(json!({"resultType": "complete", "contents": [{"uri": request.uri, "mimeType": "application/json", "text": run.to_string()}]})).map_err(|e| McpError::internal_error(format!("resource: {e}"), None))?;
                Ok(r.into())
            }
            Err((_, v)) => {
                Err(McpError::resource_not_found(v["message"].as_str().unwrap_or("no such run").to_string(), None))
            }
        }
    }
}

/// A tool's answer: the API's JSON as structured content (and as text); an API error is a tool
/// error the model can read (`code: message`).
fn tool_result(answer: ApiAnswer) -> CallToolResult {
    match answer {
        Ok(v) => CallToolResult::structured(v),
        Err((status, v)) => {
            let code = v["code"].as_str().unwrap_or("error");
            let message = v["message"].as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
                "{code} (HTTP {}): {message}",
                status.as_u16()
            ))]);
            r.structured_content = Some(v);
            r
        }
    }
}

fn str_arg(args: &Map<String, Value>, k: &str) -> Result<Option<String>, McpError> {
    match args.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(McpError::invalid_params(format!("`{k}` must be a string"), None)),
    }
}

fn object_arg(args: &Map<String, Value>, k: &str) -> Result<Map<String, Value>, McpError> {
    match args.get(k) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(McpError::invalid_params(format!("`{k}` must be an object"), None)),
    }
}

/// Form answers for array/object parameters come as JSON text.
fn typed(values: Map<String, Value>, kinds: &Map<String, Value>) -> Map<String, Value> {
    values
        .into_iter()
        .map(|(k, v)| {
            let structured =
                matches!(kinds.get(&k).and_then(Value::as_str), Some("array" | "object" | "list" | "dict"));
            let v = match (&v, structured) {
                (Value::String(s), true) => serde_json::from_str(s).unwrap_or(v),
                _ => v,
            };
            (k, v)
        })
        .collect()
}

/// The negotiated protocol has no server-to-client requests (2026-07-28 and later).
fn modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version().is_some_and(|v| !v.has_initialize())
}

fn supports_elicitation(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities().is_some_and(|c| c.elicitation.is_some())
}

fn sse_event(event: &str) -> (String, String) {
    let (mut kind, mut data) = (String::from("message"), String::new());
    for line in event.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            kind = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    (kind, data)
}

/// One line for a trace step (what a progress notification says).
fn step_line(step: &Value) -> String {
    let kind = step["type"].as_str().unwrap_or("step");
    let what = step["api"]
        .as_str()
        .or_else(|| step["subtask"].as_str())
        .or_else(|| step["reason"].as_str())
        .unwrap_or_default();
    let status = match step["status"].as_u64() {
        Some(s) => format!(" HTTP {s}"),
        None => String::new(),
    };
    format!("{kind} {what}{status}").trim().chars().take(200).collect()
}

fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_and_step_lines_are_read() {
        let (k, d) = sse_event("event: step\ndata: {\"type\":\"call\",\"api\":\"a/b/c\"}\n\n");
        assert_eq!(k, "step");
        let v: Value = serde_json::from_str(&d).unwrap();
        assert_eq!(step_line(&v), "call a/b/c");
        assert_eq!(step_line(&json!({"type": "response", "api": "a/b/c", "status": 404})), "response a/b/c HTTP 404");
    }

    #[test]
    fn tool_definitions_parse_and_form_answers_are_typed() {
        assert_eq!(tools().len(), 5);
        let kinds: Map<String, Value> = serde_json::from_value(json!({"ids": "array", "q": "string"})).unwrap();
        let v = typed(serde_json::from_value(json!({"ids": "[1,2]", "q": "[x]"})).unwrap(), &kinds);
        assert_eq!(v["ids"], json!([1, 2]));
        assert_eq!(v["q"], json!("[x]"));
        assert_eq!(enc("a b/ü"), "a%20b/%C3%BC");
    }
}
