//! The read views the console needs beyond the run API: categories, API lists, graph
//! neighbourhoods, long-term memory, run settings, and checking a chain before it runs.

use super::auth::require_admin;
use super::error::{ApiError, ApiJson};
use super::shared::Daemon;
use crate::state::Caller;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// A category's id or name.
    #[param(max_length = 300)]
    category: Option<String>,
    /// A tool's id or name.
    #[param(max_length = 300)]
    tool: Option<String>,
    /// Words of the id, name or description.
    #[param(max_length = 300)]
    q: Option<String>,
    /// `active` or `invalid`.
    #[param(max_length = 300)]
    status: Option<String>,
    offset: Option<usize>,
    /// 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<usize>,
}

/// An API in a list.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ApiSummary {
    id: String,
    name: String,
    tool: String,
    tool_name: String,
    category: String,
    category_name: String,
    method: String,
    /// `active` or `invalid`.
    status: String,
    /// Successes / calls (null before any call).
    availability: Option<f64>,
    calls: u64,
    successes: u64,
    /// The first 300 characters.
    description: String,
}

const MAX_LIMIT: usize = 200;

fn api_summary(g: &toolgraph_schema::GraphSnapshot, a: &toolgraph_schema::ApiNode) -> ApiSummary {
    ApiSummary {
        id: a.id.clone(),
        name: a.name.clone(),
        tool: a.tool.clone(),
        tool_name: tool_name(g, &a.tool).to_string(),
        category: a.category.clone(),
        category_name: category_name(g, &a.category).to_string(),
        method: a.method.clone(),
        status: a.status.clone(),
        availability: a.availability(),
        calls: a.calls,
        successes: a.successes,
        description: a.description.chars().take(300).collect(),
    }
}

fn tool_name<'a>(g: &'a toolgraph_schema::GraphSnapshot, id: &'a str) -> &'a str {
    g.tools.get(id).map(|t| t.name.as_str()).filter(|n| !n.is_empty()).unwrap_or(id)
}

fn category_name<'a>(g: &'a toolgraph_schema::GraphSnapshot, id: &'a str) -> &'a str {
    g.categories.get(id).map(|c| c.name.as_str()).filter(|n| !n.is_empty()).unwrap_or(id)
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Category {
    id: String,
    name: String,
    tools: usize,
    apis: usize,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Categories {
    categories: Vec<Category>,
}

/// Categories (id, name) with their numbers of tools and APIs.
#[utoipa::path(get, path = "/v1/categories", tag = "graph", responses((status = 200, description = "every category", body = Categories)))]
pub(super) async fn categories(State(d): State<Arc<Daemon>>) -> Json<Categories> {
    let engine = d.engine();
    let g = engine.graph();
    let mut by: BTreeMap<&str, (BTreeSet<&str>, usize)> = BTreeMap::new();
    for a in g.apis.values() {
        let e = by.entry(a.category.as_str()).or_default();
        e.0.insert(a.tool.as_str());
        e.1 += 1;
    }
    let list = by
        .into_iter()
        .map(|(id, (tools, apis))| Category {
            id: id.to_string(),
            name: category_name(g, id).to_string(),
            tools: tools.len(),
            apis,
        })
        .collect();
    Json(Categories { categories: list })
}

/// A tool and its number of APIs.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ToolCount {
    id: String,
    name: String,
    apis: usize,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ApiPage {
    total: usize,
    offset: usize,
    limit: usize,
    apis: Vec<ApiSummary>,
    /// With `category` alone: that category's tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<ToolCount>>,
}

/// APIs, paged, by category and tool (ids or names), status and words.
///
/// Ordered by category, tool, name. With `category` (and no `tool`) also that category's tools
/// and their API counts.
#[utoipa::path(get, path = "/v1/tools", tag = "tools", params(ListQuery), responses((status = 200, description = "a page of APIs", body = ApiPage)))]
pub(super) async fn list_apis(
    State(d): State<Arc<Daemon>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<ApiPage>, ApiError> {
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
        .filter(|a| {
            text.as_deref().is_none_or(|t| {
                a.id.to_lowercase().contains(t)
                    || a.name.to_lowercase().contains(t)
                    || a.description.to_lowercase().contains(t)
            })
        })
        .collect();
    apis.sort_by(|a, b| (&a.category, &a.tool, &a.name).cmp(&(&b.category, &b.tool, &b.name)));
    let total = apis.len();
    let offset = q.offset.unwrap_or(0).min(total);
    let page = apis.iter().skip(offset).take(limit).map(|a| api_summary(g, a)).collect();
    let mut out = ApiPage { total, offset, limit, apis: page, tools: None };
    if q.category.is_some() && q.tool.is_none() {
        let mut tools: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &apis {
            *tools.entry(a.tool.as_str()).or_default() += 1;
        }
        out.tools = Some(
            tools
                .into_iter()
                .map(|(id, n)| ToolCount { id: id.to_string(), name: tool_name(g, id).to_string(), apis: n })
                .collect(),
        );
    }
    Ok(Json(out))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct NeighbourhoodQuery {
    /// An API id, `START` (default) or `END`.
    id: Option<String>,
    /// 1 to 50 (default 8).
    #[param(minimum = 1, maximum = 50)]
    k: Option<usize>,
}

/// An edge of a neighbourhood: NEXT (with its count and weights) or FEEDS (with the shared fields).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Edge {
    /// `NEXT` or `FEEDS`.
    kind: &'static str,
    from: String,
    to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    static_weight: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dynamic_weight: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fields: Option<Vec<String>>,
}

/// A node of a neighbourhood: an API (`kind: api`, with its summary) or START/END (`terminal`).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Node {
    /// `api` or `terminal`.
    kind: &'static str,
    id: String,
    name: String,
    tool: String,
    category: String,
    // An API node also has the rest of its summary (a terminal has none of these).
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    category_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    /// Successes / calls (null before any call).
    #[serde(skip_serializing_if = "Option::is_none")]
    availability: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    calls: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    successes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Neighbourhood {
    center: String,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    successors_total: usize,
    predecessors_total: usize,
}

/// An API's (or START's) neighbourhood.
///
/// The node, its top-k successors and predecessors by dynamic weight (NEXT edges with count,
/// static and dynamic weight) and the FEEDS edges (shared fields) among them.
#[utoipa::path(get, path = "/v1/graph/neighborhood", tag = "graph", params(NeighbourhoodQuery),
    responses((status = 200, description = "the neighbourhood", body = Neighbourhood), (status = 404, description = "no such API", body = super::error::ErrorBody)))]
pub(super) async fn neighbourhood(
    State(d): State<Arc<Daemon>>,
    q: Result<Query<NeighbourhoodQuery>, QueryRejection>,
) -> Result<Json<Neighbourhood>, ApiError> {
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
        return Err(ApiError::not_found(format!(
            "no API {} (ids look like category/tool/api, or START)",
            id.chars().take(200).collect::<String>()
        )));
    }
    let mut edges = Vec::new();
    let mut nodes: BTreeSet<String> = BTreeSet::from([id.clone()]);
    let out_total = g.next.range((id.clone(), String::new())..).take_while(|((f, _), _)| *f == id).count();
    for s in g.successors(&id, k) {
        edges.push(Edge {
            kind: "NEXT",
            from: id.clone(),
            to: s.id.clone(),
            count: Some(s.count),
            static_weight: Some(s.static_weight),
            dynamic_weight: Some(s.dynamic_weight),
            fields: None,
        });
        nodes.insert(s.id);
    }
    let mut preds: Vec<(&String, &toolgraph_schema::NextEdge)> =
        g.next.iter().filter(|((_, t), _)| *t == id).map(|((f, _), e)| (f, e)).collect();
    let in_total = preds.len();
    preds.sort_by(|a, b| b.1.dynamic_weight.total_cmp(&a.1.dynamic_weight).then_with(|| a.0.cmp(b.0)));
    for (f, e) in preds.into_iter().take(k) {
        if f == &id {
            continue;
        }
        edges.push(Edge {
            kind: "NEXT",
            from: f.clone(),
            to: id.clone(),
            count: Some(e.count),
            static_weight: Some(e.static_weight),
            dynamic_weight: Some(e.dynamic_weight),
            fields: None,
        });
        nodes.insert(f.clone());
    }
    for ((f, t), fields) in &g.feeds {
        if nodes.contains(f) && nodes.contains(t) && (f == &id || t == &id) {
            edges.push(Edge {
                kind: "FEEDS",
                from: f.clone(),
                to: t.clone(),
                count: None,
                static_weight: None,
                dynamic_weight: None,
                fields: Some(fields.clone()),
            });
        }
    }
    let node_list = nodes
        .iter()
        .map(|n| match g.apis.get(n) {
            Some(a) => {
                let s = api_summary(g, a);
                Node {
                    kind: "api",
                    id: s.id,
                    name: s.name,
                    tool: s.tool,
                    category: s.category,
                    tool_name: Some(s.tool_name),
                    category_name: Some(s.category_name),
                    method: Some(s.method),
                    status: Some(s.status),
                    availability: Some(s.availability),
                    calls: Some(s.calls),
                    successes: Some(s.successes),
                    description: Some(s.description),
                }
            }
            None => Node {
                kind: "terminal",
                id: n.clone(),
                name: n.clone(),
                tool: String::new(),
                category: String::new(),
                tool_name: None,
                category_name: None,
                method: None,
                status: None,
                availability: None,
                calls: None,
                successes: None,
                description: None,
            },
        })
        .collect();
    Ok(Json(Neighbourhood {
        center: id,
        nodes: node_list,
        edges,
        successors_total: out_total,
        predecessors_total: in_total,
    }))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct MemoryQuery {
    /// Words of the request, or an API id.
    #[param(max_length = 300)]
    q: Option<String>,
    offset: Option<usize>,
    /// 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<usize>,
}

/// A remembered (request → chain) pair.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct MemoryEntry {
    id: String,
    request: String,
    /// The chain's steps (API, arguments).
    chain: Vec<Value>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct MemoryPage {
    total: usize,
    entries: Vec<MemoryEntry>,
}

/// The long-term memory's (request → chain) entries (administrators).
///
/// Filtered by words of the request or API ids (memories hold every user's requests).
#[utoipa::path(get, path = "/v1/memory", tag = "graph", params(MemoryQuery), responses((status = 200, description = "the entries", body = MemoryPage)))]
pub(super) async fn list_memory(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<MemoryQuery>, QueryRejection>,
) -> Result<Json<MemoryPage>, ApiError> {
    require_admin(&caller, "the long-term memory")?;
    let q = q?.0;
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_LIMIT || q.q.as_ref().is_some_and(|t| t.chars().count() > 300) {
        return Err(ApiError::invalid(format!("`limit` must be 1..={MAX_LIMIT}, `q` at most 300 characters")));
    }
    let text = q.q.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_lowercase);
    let mut all = d.stack.memory.list().await?;
    all.retain(|(_, e)| {
        text.as_deref().is_none_or(|t| {
            e.request.to_lowercase().contains(t) || e.chain.iter().any(|s| s.api.to_lowercase().contains(t))
        })
    });
    all.sort_by(|a, b| a.1.request.cmp(&b.1.request));
    let total = all.len();
    let entries = all
        .into_iter()
        .skip(q.offset.unwrap_or(0))
        .take(limit)
        .map(|(id, e)| MemoryEntry { id, request: e.request, chain: e.chain.iter().map(|s| json!(s)).collect() })
        .collect();
    Ok(Json(MemoryPage { total, entries }))
}

/// Delete a stored plan (administrators).
#[utoipa::path(delete, path = "/v1/memory/{id}", tag = "graph", params(("id" = String, Path, description = "the memory's id")), responses((status = 204, description = "deleted")))]
pub(super) async fn delete_memory(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    require_admin(&caller, "the long-term memory")?;
    if id.len() > 200 || !d.stack.memory.delete(&id).await? {
        return Err(ApiError::not_found(format!("no memory {}", id.chars().take(100).collect::<String>())));
    }
    d.audit(&caller, "memory.delete", &id, json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SettingsModels {
    default: String,
    list: Vec<toolgraph_engine::plan::models::ModelInfo>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SettingsLimits {
    max_request_chars: usize,
    max_in_flight: usize,
    rate_per_s: f64,
    console_login_hours: u64,
}

/// What the daemon runs with (no secrets: none of these sections holds one).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SettingsView {
    /// The run defaults requests start from (`run` of the configuration).
    run: Value,
    graph: String,
    vectors: String,
    state: String,
    models: SettingsModels,
    limits: SettingsLimits,
}

/// Run defaults, backends, models and limits (administrators; no secrets).
#[utoipa::path(get, path = "/v1/settings", tag = "console", responses((status = 200, description = "the settings", body = SettingsView)))]
pub(super) async fn settings(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<SettingsView>, ApiError> {
    require_admin(&caller, "the daemon's settings")?;
    let s = d.settings();
    Ok(Json(SettingsView {
        run: json!(s.run),
        graph: d.stack.store.backend().to_string(),
        vectors: d.stack.vectors.backend().to_string(),
        state: d.state.backend().to_string(),
        models: SettingsModels { default: d.models.default_name().to_string(), list: d.models.list() },
        limits: SettingsLimits {
            max_request_chars: s.server.max_request_chars,
            max_in_flight: s.server.max_in_flight,
            rate_per_s: s.server.rate_per_s,
            console_login_hours: s.server.console_login_hours,
        },
    }))
}

/// A chain to check: its steps as `POST /v1/chains/execute` takes them.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckChain {
    #[schema(value_type = Vec<super::history::Step>, min_items = 1)]
    steps: Value,
    #[serde(default)]
    request: Option<String>,
}

/// A valid chain: its number of steps and the output fields each step offers to later ones.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct CheckedChain {
    valid: bool,
    steps: usize,
    /// `varN` → the output fields of step N.
    outputs: BTreeMap<String, Vec<String>>,
}

/// Validate a chain as `POST /v1/chains/execute` would (nothing runs).
#[utoipa::path(post, path = "/v1/chains/check", tag = "chains", request_body = CheckChain,
    responses((status = 200, description = "valid; what each step offers later ones", body = CheckedChain), (status = 422, description = "the chain is invalid (`invalid_chain`), naming the step", body = super::error::ErrorBody)))]
pub(super) async fn check_chain(
    State(d): State<Arc<Daemon>>,
    ApiJson(b): ApiJson<CheckChain>,
) -> Result<Json<CheckedChain>, ApiError> {
    let chain = super::history::check_steps(&b.steps)?;
    let request = b.request.unwrap_or_else(|| "chain".into());
    d.engine().check_chain(&request, &chain).map_err(|e| ApiError::unprocessable("invalid_chain", e))?;
    let n = chain["steps"].as_array().map(Vec::len).unwrap_or(0);
    let mut outputs = BTreeMap::new();
    for (i, s) in chain["steps"].as_array().into_iter().flatten().enumerate() {
        if let Some(a) = s.get("api").and_then(Value::as_str).and_then(|id| d.engine().graph().apis.get(id).cloned()) {
            outputs.insert(format!("var{}", i + 1), a.output_fields.clone());
        }
    }
    Ok(Json(CheckedChain { valid: true, steps: n, outputs }))
}
