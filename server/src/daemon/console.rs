//! The web console at `/`: its assets (embedded at build time from `console/dist`), the login that
//! turns a name + password (or an API key) into an HttpOnly, SameSite=Strict cookie session whose
//! state-changing requests must echo a CSRF token, and the read views the console needs beyond
//! the run API: categories, API lists, graph neighbourhoods, long-term memory, run settings.

use super::error::{ApiError, ApiJson};
use super::{require_admin, Daemon};
use crate::state::{now_ms, random_id, Caller, Role};
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));

/// The cookie of a console login.
pub const COOKIE: &str = "tg_session";
/// The header a console request echoes its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How the caller of a `/v1/*` request was let in: by a console login (with its CSRF token).
#[derive(Debug, Clone, Default)]
pub struct ConsoleLogin {
    pub csrf: Option<String>,
}

/// Whether the console's assets were built into this binary.
pub fn built() -> bool {
    CONSOLE_ASSETS.iter().any(|(p, _, _)| *p == "index.html")
}

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

fn page_headers(ty: &str, cache: &'static str) -> [(header::HeaderName, HeaderValue); 6] {
    [
        (header::CONTENT_TYPE, HeaderValue::from_str(ty).unwrap_or(HeaderValue::from_static("application/octet-stream"))),
        (header::CACHE_CONTROL, HeaderValue::from_static(cache)),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    ]
}

/// `GET /`: the console's page, or how to build it.
pub(super) async fn index() -> Response {
    match CONSOLE_ASSETS.iter().find(|(p, _, _)| *p == "index.html") {
        Some((_, ty, bytes)) => (page_headers(ty, "no-cache"), *bytes).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            page_headers("text/html; charset=utf-8", "no-store"),
            "<!doctype html><meta charset=utf-8><title>toolgraph</title><h1>The console is not built into this binary</h1>\
             <p>Build it with <code>bash scripts/console.sh build</code> (Node.js 20+ and npm; packages from the npm registry), \
             then rebuild toolgraph (<code>cargo build --release --bin toolgraph</code>). The HTTP API is served as usual: see <a href=\"/openapi.json\">/openapi.json</a>.</p>",
        )
            .into_response(),
    }
}

/// `GET /assets/{*path}`: a built asset (content-hashed names: cached for a year).
pub(super) async fn asset(Path(path): Path<String>) -> Response {
    let want = format!("assets/{path}");
    match CONSOLE_ASSETS.iter().find(|(p, _, _)| *p == want) {
        Some((_, ty, bytes)) => (page_headers(ty, "public, max-age=31536000, immutable"), *bytes).into_response(),
        None => ApiError::not_found(format!("no console asset {}", path.chars().take(100).collect::<String>())).into_response(),
    }
}

/// The value of the console's cookie, if the request carries one.
pub fn session_cookie(h: &HeaderMap) -> Option<&str> {
    h.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == COOKIE && !v.is_empty() && v.len() <= 200).then_some(v)
    })
}

/// Constant-time comparison of two tokens.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn cookie(token: &str, max_age_s: u64, secure: bool) -> HeaderValue {
    let v = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{}", if secure { "; Secure" } else { "" });
    HeaderValue::from_str(&v).unwrap_or(HeaderValue::from_static("tg_session=; Max-Age=0"))
}

fn behind_https(h: &HeaderMap) -> bool {
    h.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
}

/// A hash that no password matches, verified for unknown names so that a login takes as long
/// whether or not the name exists.
fn decoy_hash() -> &'static str {
    static H: OnceLock<String> = OnceLock::new();
    H.get_or_init(|| crate::state::secrets::hash_password(&random_id("decoy", 16)).unwrap_or_default())
}

/// `POST /v1/login`: `{name, password}` or `{api_key}` → the cookie session (HttpOnly,
/// SameSite=Strict) and the CSRF token that state-changing requests echo in `X-CSRF-Token`.
/// A daemon that needs no keys (local, none configured) answers `login_required: false`.
pub(super) async fn login(State(d): State<Arc<Daemon>>, headers: HeaderMap, peer: Option<Extension<ConnectInfo<SocketAddr>>>, ApiJson(b): ApiJson<Login>) -> Result<Response, ApiError> {
    if !d.auth_required.load(Ordering::Relaxed) {
        let local = Caller { user_id: "local".into(), name: "local".into(), role: Role::Admin };
        return Ok(Json(json!({"login_required": false, "user": me_of(&local)})).into_response());
    }
    let ip = peer.map(|c| c.0 .0.ip().to_string()).unwrap_or_else(|| "anonymous".into());
    // Password guessing: a slow bucket per address and per name (10 tries, then one every 6 s).
    let name_key = b.name.as_deref().map(|n| format!("name:{}", n.to_lowercase().chars().take(64).collect::<String>()));
    for key in std::iter::once(format!("ip:{ip}")).chain(name_key) {
        if let Err(wait) = d.login_limiter.take(&key) {
            d.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "too many login attempts; retry later").with_retry_after(wait));
        }
    }
    let too_long = |s: &Option<String>| s.as_ref().is_some_and(|s| s.is_empty() || s.chars().count() > 200);
    if too_long(&b.name) || too_long(&b.password) || too_long(&b.api_key) {
        return Err(ApiError::invalid("name, password and api_key are 1 to 200 characters"));
    }
    let denied = || ApiError::new(StatusCode::UNAUTHORIZED, "invalid_login", "the name and password (or the API key) are not valid");
    let via_key = b.api_key.clone();
    let caller = match (&b.name, &b.password, &b.api_key) {
        (Some(name), Some(password), None) => {
            let found = d.state.password_hash(name).await?;
            let hash = found.as_ref().map(|(_, h)| h.clone()).unwrap_or_else(|| decoy_hash().to_string());
            let password = password.clone();
            let ok = tokio::task::spawn_blocking(move || crate::state::secrets::verify_password(&password, &hash)).await.unwrap_or(false);
            match (found, ok) {
                (Some((u, _)), true) => Caller { user_id: u.id, name: u.name, role: u.role },
                _ => {
                    tracing::warn!(user = %name.chars().take(64).collect::<String>(), %ip, "console login refused");
                    return Err(denied());
                }
            }
        }
        (None, None, Some(key)) => d.caller_of(key).await?.ok_or_else(denied)?,
        _ => return Err(ApiError::invalid("give `name` and `password`, or `api_key`")),
    };
    let token = random_id("tgs", 32);
    let csrf = random_id("csrf", 16);
    let hours = d.settings().server.console_login_hours.max(1);
    let expires_ms = now_ms() + hours as i64 * 3_600_000;
    d.state.put_login(&token, &caller, &csrf, expires_ms, via_key.as_deref()).await?;
    d.audit(&caller, "console.login", &caller.user_id, json!({"ip": ip})).await;
    let mut r = Json(json!({"login_required": true, "user": me_of(&caller), "csrf_token": csrf, "expires_ms": expires_ms})).into_response();
    r.headers_mut().insert(header::SET_COOKIE, cookie(&token, hours * 3600, behind_https(&headers)));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

/// `POST /v1/logout`: end this browser's login (idempotent).
pub(super) async fn logout(State(d): State<Arc<Daemon>>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(token) = session_cookie(&headers) {
        // Like every state-changing request of a login, logout echoes its CSRF token: another
        // site cannot end a person's login. A login that is gone already needs none.
        if let Some(login) = d.state.login(token).await? {
            let echoed = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
            if !same_token(echoed, &login.csrf) {
                return Err(ApiError::new(StatusCode::FORBIDDEN, "csrf_failed", "logging out needs the login's CSRF token in `X-CSRF-Token`"));
            }
        }
        d.state.delete_login(token).await?;
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(header::SET_COOKIE, cookie("", 0, behind_https(&headers)));
    Ok(r)
}

pub(super) fn me_of(c: &Caller) -> Value {
    json!({"user_id": c.user_id, "name": c.name, "role": c.role})
}

// ---- read views for the console ----

#[derive(Debug, Default, Deserialize)]
pub(super) struct ListQuery {
    category: Option<String>,
    tool: Option<String>,
    q: Option<String>,
    status: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
}

const MAX_LIMIT: usize = 200;

fn api_summary(g: &toolgraph_schema::GraphSnapshot, a: &toolgraph_schema::ApiNode) -> Value {
    json!({"id": a.id, "name": a.name, "tool": a.tool, "tool_name": tool_name(g, &a.tool), "category": a.category, "category_name": category_name(g, &a.category), "method": a.method, "status": a.status, "availability": a.availability(), "calls": a.calls, "successes": a.successes, "description": a.description.chars().take(300).collect::<String>()})
}

fn tool_name<'a>(g: &'a toolgraph_schema::GraphSnapshot, id: &'a str) -> &'a str {
    g.tools.get(id).map(|t| t.name.as_str()).filter(|n| !n.is_empty()).unwrap_or(id)
}

fn category_name<'a>(g: &'a toolgraph_schema::GraphSnapshot, id: &'a str) -> &'a str {
    g.categories.get(id).map(|c| c.name.as_str()).filter(|n| !n.is_empty()).unwrap_or(id)
}

/// `GET /v1/categories`: every category (id and name) with its number of tools and APIs.
pub(super) async fn categories(State(d): State<Arc<Daemon>>) -> Json<Value> {
    let engine = d.engine();
    let g = engine.graph();
    let mut by: BTreeMap<&str, (BTreeSet<&str>, usize)> = BTreeMap::new();
    for a in g.apis.values() {
        let e = by.entry(a.category.as_str()).or_default();
        e.0.insert(a.tool.as_str());
        e.1 += 1;
    }
    let list: Vec<Value> = by.into_iter().map(|(id, (tools, apis))| json!({"id": id, "name": category_name(g, id), "tools": tools.len(), "apis": apis})).collect();
    Json(json!({"categories": list}))
}

/// `GET /v1/tools?category=&tool=&q=&status=&offset=&limit=`: APIs, paged (ordered by category,
/// tool, name); `category` and `tool` take an id or a name. With `category` (and no `tool`) also
/// that category's tools and their API counts.
pub(super) async fn list_apis(State(d): State<Arc<Daemon>>, q: Result<Query<ListQuery>, QueryRejection>) -> Result<Json<Value>, ApiError> {
    let q = q?.0;
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::invalid(format!("`limit` must be 1..={MAX_LIMIT}")));
    }
    if [&q.category, &q.tool, &q.q, &q.status].iter().any(|v| v.as_ref().is_some_and(|s| s.chars().count() > 300)) {
        return Err(ApiError::invalid("filters are at most 300 characters"));
    }
    let text = q.q.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_lowercase);
    let engine = d.engine();
    let g = engine.graph();
    let matches = |id: &str, name: &str, want: &str| id.eq_ignore_ascii_case(want) || name.eq_ignore_ascii_case(want);
    let mut apis: Vec<&toolgraph_schema::ApiNode> = g
        .apis
        .values()
        .filter(|a| q.category.as_deref().is_none_or(|c| matches(&a.category, category_name(g, &a.category), c)))
        .filter(|a| q.tool.as_deref().is_none_or(|t| matches(&a.tool, tool_name(g, &a.tool), t)))
        .filter(|a| q.status.as_deref().is_none_or(|s| a.status == s))
        .filter(|a| text.as_deref().is_none_or(|t| a.id.to_lowercase().contains(t) || a.name.to_lowercase().contains(t) || a.description.to_lowercase().contains(t)))
        .collect();
    apis.sort_by(|a, b| (&a.category, &a.tool, &a.name).cmp(&(&b.category, &b.tool, &b.name)));
    let total = apis.len();
    let offset = q.offset.unwrap_or(0).min(total);
    let page: Vec<Value> = apis.iter().skip(offset).take(limit).map(|a| api_summary(g, a)).collect();
    let mut out = json!({"total": total, "offset": offset, "limit": limit, "apis": page});
    if q.category.is_some() && q.tool.is_none() {
        let mut tools: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &apis {
            *tools.entry(a.tool.as_str()).or_default() += 1;
        }
        out["tools"] = json!(tools.into_iter().map(|(id, n)| json!({"id": id, "name": tool_name(g, id), "apis": n})).collect::<Vec<_>>());
    }
    Ok(Json(out))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct NeighbourhoodQuery {
    id: Option<String>,
    k: Option<usize>,
}

/// `GET /v1/graph/neighborhood?id=API|START&k=8`: the node, its top-k successors and
/// predecessors by dynamic weight (NEXT edges with both weights) and the FEEDS edges among them.
pub(super) async fn neighbourhood(State(d): State<Arc<Daemon>>, q: Result<Query<NeighbourhoodQuery>, QueryRejection>) -> Result<Json<Value>, ApiError> {
    let q = q?.0;
    let id = q.id.unwrap_or_else(|| "START".into());
    let k = q.k.unwrap_or(8);
    if k == 0 || k > 50 {
        return Err(ApiError::invalid("`k` must be 1..=50"));
    }
    let engine = d.engine();
    let g = engine.graph();
    let special = |s: &str| s == "START" || s == "END";
    if !special(&id) && !g.apis.contains_key(&id) {
        return Err(ApiError::not_found(format!("no API {} (ids look like category/tool/api, or START)", id.chars().take(200).collect::<String>())));
    }
    let mut edges = Vec::new();
    let mut nodes: BTreeSet<String> = BTreeSet::from([id.clone()]);
    let out_total = g.next.range((id.clone(), String::new())..).take_while(|((f, _), _)| *f == id).count();
    for s in g.successors(&id, k) {
        edges.push(json!({"kind": "NEXT", "from": id, "to": s.id, "count": s.count, "static_weight": s.static_weight, "dynamic_weight": s.dynamic_weight}));
        nodes.insert(s.id);
    }
    let mut preds: Vec<(&String, &toolgraph_schema::NextEdge)> = g.next.iter().filter(|((_, t), _)| *t == id).map(|((f, _), e)| (f, e)).collect();
    let in_total = preds.len();
    preds.sort_by(|a, b| b.1.dynamic_weight.total_cmp(&a.1.dynamic_weight).then_with(|| a.0.cmp(b.0)));
    for (f, e) in preds.into_iter().take(k) {
        if f == &id {
            continue;
        }
        edges.push(json!({"kind": "NEXT", "from": f, "to": id, "count": e.count, "static_weight": e.static_weight, "dynamic_weight": e.dynamic_weight}));
        nodes.insert(f.clone());
    }
    for ((f, t), fields) in &g.feeds {
        if nodes.contains(f) && nodes.contains(t) && (f == &id || t == &id) {
            edges.push(json!({"kind": "FEEDS", "from": f, "to": t, "fields": fields}));
        }
    }
    let node_list: Vec<Value> = nodes
        .iter()
        .map(|n| match g.apis.get(n) {
            Some(a) => {
                let mut v = api_summary(g, a);
                v["kind"] = json!("api");
                v
            }
            None => json!({"id": n, "name": n, "kind": "terminal", "tool": "", "category": ""}),
        })
        .collect();
    Ok(Json(json!({"center": id, "nodes": node_list, "edges": edges, "successors_total": out_total, "predecessors_total": in_total})))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct MemoryQuery {
    q: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// `GET /v1/memory?q=&offset=&limit=` (administrators: memories hold every user's requests):
/// the long-term memory's (request → chain) entries, filtered by text in the request or API ids.
pub(super) async fn list_memory(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, q: Result<Query<MemoryQuery>, QueryRejection>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "the long-term memory")?;
    let q = q?.0;
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_LIMIT || q.q.as_ref().is_some_and(|t| t.chars().count() > 300) {
        return Err(ApiError::invalid(format!("`limit` must be 1..={MAX_LIMIT}, `q` at most 300 characters")));
    }
    let text = q.q.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_lowercase);
    let mut all = d.stack.memory.list().await?;
    all.retain(|(_, e)| text.as_deref().is_none_or(|t| e.request.to_lowercase().contains(t) || e.chain.iter().any(|s| s.api.to_lowercase().contains(t))));
    all.sort_by(|a, b| a.1.request.cmp(&b.1.request));
    let total = all.len();
    let entries: Vec<Value> = all.into_iter().skip(q.offset.unwrap_or(0)).take(limit).map(|(id, e)| json!({"id": id, "request": e.request, "chain": e.chain})).collect();
    Ok(Json(json!({"total": total, "entries": entries})))
}

/// `DELETE /v1/memory/{id}` (administrators).
pub(super) async fn delete_memory(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    require_admin(&caller, "the long-term memory")?;
    if id.len() > 200 || !d.stack.memory.delete(&id).await? {
        return Err(ApiError::not_found(format!("no memory {}", id.chars().take(100).collect::<String>())));
    }
    d.audit(&caller, "memory.delete", &id, json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/settings` (administrators): the run defaults requests start from, the graph and
/// vector backends, the state store (no secrets: none of these sections holds one).
pub(super) async fn settings(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "the daemon's settings")?;
    let s = d.settings();
    Ok(Json(json!({
        "run": s.run,
        "graph": d.stack.store.backend(),
        "vectors": d.stack.vectors.backend(),
        "state": d.state.backend(),
        "models": {"default": d.models.default_name(), "list": d.models.list()},
        "limits": {"max_request_chars": s.server.max_request_chars, "max_in_flight": s.server.max_in_flight, "rate_per_s": s.server.rate_per_s, "console_login_hours": s.server.console_login_hours},
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckChain {
    steps: Value,
    #[serde(default)]
    request: Option<String>,
}

/// `POST /v1/chains/check`: validate a chain as `POST /v1/chains/execute` would (nothing runs).
pub(super) async fn check_chain(State(d): State<Arc<Daemon>>, ApiJson(b): ApiJson<CheckChain>) -> Result<Json<Value>, ApiError> {
    let chain = super::history::check_steps(&b.steps)?;
    let request = b.request.unwrap_or_else(|| "chain".into());
    d.engine().check_chain(&request, &chain).map_err(|e| ApiError::unprocessable("invalid_chain", e))?;
    let n = chain["steps"].as_array().map(Vec::len).unwrap_or(0);
    let mut outputs = Map::new();
    for (i, s) in chain["steps"].as_array().into_iter().flatten().enumerate() {
        if let Some(a) = s.get("api").and_then(Value::as_str).and_then(|id| d.engine().graph().apis.get(id).cloned()) {
            outputs.insert(format!("var{}", i + 1), json!(a.output_fields));
        }
    }
    Ok(Json(json!({"valid": true, "steps": n, "outputs": outputs})))
}
