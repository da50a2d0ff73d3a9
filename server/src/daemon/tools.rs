//! Tools: search, registration (validated, SSRF-checked and test-called before admission, thesis
//! §5.2.14) and status changes (an invalidated API leaves search and the long-term memories that
//! use it are deleted); OpenAPI 3 import, through the same admission, is [`super::openapi_import`].

use super::error::{ApiError, ApiJson};
use super::shared::Daemon;
use crate::state::Caller;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use toolgraph_engine::exec::{kind, response_problem, CallSpec};
use toolgraph_engine::graph::ApiUpsert;
use toolgraph_engine::retrieval::hybrid::Method;
use toolgraph_engine::retrieval::Filter;
use toolgraph_engine::run::now_rfc3339;
use toolgraph_schema::{api_id, output_fields, ApiDoc, ParamDoc, StatusChange, STATUS_ACTIVE, STATUS_INVALID};

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SearchQuery {
    /// The text to search for (required).
    #[param(required = true, min_length = 1, max_length = 1000)]
    q: Option<String>,
    /// 1 to 100 (default 10).
    #[param(minimum = 1, maximum = 100)]
    k: Option<usize>,
    /// Only this category.
    category: Option<String>,
    /// Only this tool.
    tool: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SearchResults {
    query: String,
    results: Vec<toolgraph_engine::retrieval::hybrid::RankedApi>,
}

const MAX_K: usize = 100;

/// Search APIs (hybrid retrieval: BM25 and embeddings, fused).
#[utoipa::path(get, path = "/v1/tools/search", tag = "tools", params(SearchQuery), responses((status = 200, description = "ranked APIs", body = SearchResults)))]
pub(super) async fn search(
    State(d): State<Arc<Daemon>>,
    q: Result<Query<SearchQuery>, QueryRejection>,
) -> Result<Json<SearchResults>, ApiError> {
    let q = q?.0;
    let text =
        q.q.filter(|t| !t.trim().is_empty())
            .ok_or_else(|| ApiError::invalid("`q` (the text to search for) is required"))?;
    if text.chars().count() > 1000 {
        return Err(ApiError::invalid("`q` is longer than 1000 characters"));
    }
    let k = q.k.unwrap_or(10);
    if k == 0 || k > MAX_K {
        return Err(ApiError::invalid(format!("`k` must be 1..={MAX_K}")));
    }
    let engine = d.engine();
    let filter = Filter { category: q.category, tool: q.tool, status: None };
    let hits = engine.retriever().search(&text, k, &filter, Method::Hybrid, None).await?;
    Ok(Json(SearchResults { query: text, results: hits }))
}

/// An API of the graph, as `GET /v1/tools/{id}` shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ApiView {
    id: String,
    name: String,
    tool: String,
    category: String,
    description: String,
    method: String,
    url: String,
    parameters: Vec<ParamDoc>,
    output_fields: Vec<String>,
    /// `active` or `invalid`.
    status: String,
    /// Why it has that status (empty when never changed).
    status_reason: String,
    /// Since when (RFC 3339; empty when never changed).
    status_since: String,
    /// Whether its recent calls failed often enough to avoid it now.
    degraded_now: bool,
    /// Successes / calls (null before any call).
    availability: Option<f64>,
    calls: u64,
    successes: u64,
    requires_approval: bool,
    /// What the argument filler learned for its parameters from remembered runs (per parameter:
    /// support, the kinds of request mention taken with cue words for and against and the order
    /// taken, a constant); null when nothing was learned.
    learned_arguments: Value,
}

/// An API of the graph.
#[utoipa::path(get, path = "/v1/tools/{id}", tag = "tools", params(("id" = String, Path, description = "`category/tool/api` (percent-encode the slashes, or send them as they are)")),
    responses((status = 200, description = "the API", body = ApiView)))]
pub(super) async fn get_tool(State(d): State<Arc<Daemon>>, Path(id): Path<String>) -> Result<Json<ApiView>, ApiError> {
    let engine = d.engine();
    let a = engine
        .graph()
        .apis
        .get(&id)
        .ok_or_else(|| ApiError::not_found(format!("no API {id} (ids look like category/tool/api)")))?;
    let requires_approval = d.state.requires_approval().await?.contains(&id);
    let params: Vec<ParamDoc> = serde_json::from_str(&a.parameters).unwrap_or_default();
    let learned_arguments = engine.arg_model().await?.map(|m| m.describe(&a.id)).unwrap_or(Value::Null);
    Ok(Json(ApiView {
        id: a.id.clone(),
        name: a.name.clone(),
        tool: a.tool.clone(),
        category: a.category.clone(),
        description: a.description.clone(),
        method: a.method.clone(),
        url: a.url.clone(),
        parameters: params,
        output_fields: a.output_fields.clone(),
        status: a.status.clone(),
        status_reason: a.status_reason.clone(),
        status_since: a.status_since.clone(),
        degraded_now: d.health.is_degraded(&a.id),
        availability: a.availability(),
        calls: a.calls,
        successes: a.successes,
        requires_approval,
        learned_arguments,
    }))
}

/// `POST /v1/tools`: one API to admit.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The tool (service) it belongs to; defaults to the API's name.
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub tool_description: String,
    #[serde(default)]
    pub category: Option<String>,
    /// GET (default), POST, PUT, PATCH or DELETE.
    #[serde(default = "get")]
    #[schema(default = "GET")]
    pub method: String,
    /// Absolute http(s) URL; `{name}` marks a path parameter.
    pub url: String,
    #[serde(default)]
    #[schema(max_items = 64)]
    pub parameters: Vec<ParamDoc>,
    /// JSON schema (or an example) of the response; its fields feed later calls.
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Arguments of the test call (needed when a required parameter has no default).
    #[serde(default)]
    pub example: Option<Map<String, Value>>,
}

fn get() -> String {
    "GET".into()
}

const TYPES: &[&str] = &[
    "string", "str", "text", "enum", "number", "float", "double", "integer", "int", "boolean", "bool", "array", "list",
    "object", "dict", "date", "datetime",
];
const MAX_PARAMS: usize = 64;

/// Check a registration; the problems, all of them, by field.
fn validate(r: &Registration) -> Result<(), ApiError> {
    let mut problems = Vec::new();
    if r.name.trim().is_empty() || r.name.len() > 200 {
        problems.push("name: 1..200 characters".to_string());
    }
    // Names and descriptions people read hold no invisible or reordering characters.
    for (f, v) in [
        ("name", Some(&r.name)),
        ("tool", r.tool.as_ref()),
        ("category", r.category.as_ref()),
        ("description", Some(&r.description)),
        ("tool_description", Some(&r.tool_description)),
    ] {
        if let Some(c) = v.and_then(|v| toolgraph_schema::hidden_char(v)) {
            problems.push(format!("{f}: holds an invisible or text-reordering character (U+{:04X})", c as u32));
        }
    }
    if r.description.len() > 4000 || r.tool_description.len() > 4000 {
        problems.push("description / tool_description: at most 4000 characters".into());
    }
    for (f, v) in [("tool", &r.tool), ("category", &r.category)] {
        if v.as_ref().is_some_and(|v| v.trim().is_empty() || v.len() > 200) {
            problems.push(format!("{f}: 1..200 characters"));
        }
    }
    if !["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&r.method.to_uppercase().as_str()) {
        problems.push(format!("method: `{}` is not GET, POST, PUT, PATCH or DELETE", r.method));
    }
    match reqwest::Url::parse(&r.url) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {
            if u.host_str().is_none() {
                problems.push("url: no host".into());
            }
            if !u.username().is_empty() || u.password().is_some() {
                problems.push("url: credentials in URLs are refused; pass keys as parameters".into());
            }
        }
        Ok(u) => problems.push(format!("url: scheme `{}` is not http or https", u.scheme())),
        Err(e) => problems.push(format!("url: {e}")),
    }
    if r.parameters.len() > MAX_PARAMS {
        problems.push(format!("parameters: at most {MAX_PARAMS}"));
    }
    let mut names = HashSet::new();
    for (i, p) in r.parameters.iter().enumerate() {
        if p.name.trim().is_empty() || p.name.len() > 100 {
            problems.push(format!("parameters[{i}].name: 1..100 characters"));
        }
        if let Some(c) = toolgraph_schema::hidden_char(&p.name) {
            problems.push(format!(
                "parameters[{i}].name: holds an invisible or text-reordering character (U+{:04X})",
                c as u32
            ));
        }
        if !names.insert(p.name.as_str()) {
            problems.push(format!("parameters[{i}].name: `{}` is declared twice", p.name));
        }
        let t = p.ty.trim().to_ascii_lowercase();
        if !t.is_empty() && !TYPES.contains(&t.as_str()) {
            problems.push(format!("parameters[{i}].type: `{}` is not one of {}", p.ty, TYPES.join(", ")));
        }
    }
    // Path parameters must be declared.
    let mut rest = r.url.as_str();
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else { break };
        let name = &rest[start + 1..start + end];
        if !names.contains(name) {
            problems.push(format!("url: path parameter `{{{name}}}` is not among the parameters"));
        }
        rest = &rest[start + end + 1..];
    }
    if let Some(ex) = &r.example {
        for k in ex.keys() {
            if !names.contains(k.as_str()) {
                problems.push(format!("example.{k}: no such parameter"));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::unprocessable("invalid_tool", problems.join("; ")))
    }
}

/// What admission did.
pub(super) struct Admitted {
    pub(super) id: String,
    pub(super) output_fields: Vec<String>,
    status: u16,
    elapsed_ms: f64,
    response: Value,
}

/// Validate, test-call and write one API to the graph (not yet re-indexed); with `dry_run`, stop
/// after the test call (nothing is written).
pub(super) async fn admit(
    d: &Daemon,
    r: Registration,
    default_category: &str,
    dry_run: bool,
) -> Result<Admitted, ApiError> {
    validate(&r)?;
    let category = r.category.clone().unwrap_or_else(|| default_category.to_string());
    let tool = r.tool.clone().unwrap_or_else(|| r.name.clone());
    let id = api_id(&category, &tool, &r.name);
    reqwest::Url::parse(&r.url).map_err(|e| ApiError::unprocessable("invalid_tool", format!("url: {e}")))?;
    // Checked where calls really go (after the deployment's rewrites, e.g. to a replay sandbox).
    let url = reqwest::Url::parse(&d.stack.executor.rewritten(&r.url))
        .map_err(|e| ApiError::unprocessable("invalid_tool", format!("url (rewritten): {e}")))?;
    d.stack
        .executor
        .guard()
        .check_url(&url)
        .await
        .map_err(|e| ApiError::unprocessable("url_refused", format!("url: {e}")))?;
    // The test call: the example's arguments, else required parameters' defaults.
    let mut args = r.example.clone().unwrap_or_default();
    let mut missing = Vec::new();
    for p in &r.parameters {
        if !p.required || args.contains_key(&p.name) {
            continue;
        }
        match p.default.as_ref().filter(|v| !v.is_null()) {
            Some(v) => {
                args.insert(p.name.clone(), v.clone());
            }
            None => missing.push(p.name.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(ApiError::unprocessable(
            "example_required",
            format!("the test call needs values for {}: give them in `example`", missing.join(", ")),
        ));
    }
    let spec = CallSpec {
        api_id: id.clone(),
        method: r.method.to_uppercase(),
        url: r.url.clone(),
        params: r.parameters.clone(),
    };
    let outcome =
        d.stack.executor.call(&spec, &args, &HashMap::<String, Value>::new()).await.map_err(|e| {
            ApiError::unprocessable("test_call_failed", format!("the test call of {} failed: {e}", r.name))
        })?;
    if let Some(problem) = response_problem(&outcome.response) {
        return Err(ApiError::unprocessable(
            "test_call_failed",
            format!("the test call of {} answered with an error: {problem}", r.name),
        ));
    }
    let mut fields = r.output_schema.as_ref().map(output_fields).unwrap_or_default();
    if fields.is_empty() {
        fields = output_fields(&outcome.response);
    }
    if dry_run {
        return Ok(Admitted {
            id,
            output_fields: fields,
            status: outcome.status,
            elapsed_ms: outcome.elapsed_ms,
            response: preview(&outcome.response),
        });
    }
    let params: Vec<ParamDoc> = r
        .parameters
        .iter()
        .map(|p| ParamDoc { ty: if p.ty.is_empty() { "string".into() } else { kind(&p.ty).to_string() }, ..p.clone() })
        .collect();
    let up = ApiUpsert::from_doc(&ApiDoc {
        category: category.clone(),
        tool: tool.clone(),
        api: r.name.clone(),
        tool_description: r.tool_description.clone(),
        description: r.description.clone(),
        method: r.method.to_uppercase(),
        url: r.url.clone(),
        params,
        output_fields: fields.clone(),
    });
    debug_assert_eq!(up.id, id);
    d.stack.store.upsert_apis(&[up]).await?;
    // It passed its test call: a re-registered API that was invalidated is active again.
    let change = StatusChange {
        id: id.clone(),
        status: STATUS_ACTIVE.into(),
        reason: format!("registered; its test call answered HTTP {}", outcome.status),
        since: now_rfc3339(),
        probe: Some(Value::Object(outcome.arguments.clone()).to_string()),
    };
    d.stack.store.set_api_status(&change).await?;
    d.health.reset(&id);
    Ok(Admitted {
        id,
        output_fields: fields,
        status: outcome.status,
        elapsed_ms: outcome.elapsed_ms,
        response: preview(&outcome.response),
    })
}

/// A test call's response as the console shows it: at most 4,000 characters of JSON.
pub(super) fn preview(v: &Value) -> Value {
    let text = v.to_string();
    if text.len() <= 4000 {
        v.clone()
    } else {
        json!({"truncated": true, "chars": text.len(), "head": text.chars().take(4000).collect::<String>()})
    }
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DryRun {
    /// Only the test call and its response; nothing is written.
    #[serde(default)]
    dry_run: bool,
}

/// The test call made before admission.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct TestCall {
    /// The HTTP status the API answered with.
    status: u16,
    elapsed_ms: f64,
    /// Its response (compressed).
    response: Value,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Registered {
    id: String,
    /// `active` once admitted (absent for a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    /// True for a dry run (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    dry_run: Option<bool>,
    output_fields: Vec<String>,
    test_call: TestCall,
}

/// Register an API (administrators).
///
/// Validated, its URL checked (SSRF guard), test-called, then added to the graph and the index;
/// with `dry_run=true` only the test call and its response (nothing is written).
#[utoipa::path(post, path = "/v1/tools", tag = "tools", params(DryRun), request_body = Registration,
    responses((status = 201, description = "admitted", body = Registered), (status = 200, description = "dry run: the test call", body = Registered),
        (status = 422, description = "invalid, refused URL or failed test call", body = super::error::ErrorBody)))]
pub(super) async fn register(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<DryRun>, QueryRejection>,
    ApiJson(r): ApiJson<Registration>,
) -> Result<(StatusCode, Json<Registered>), ApiError> {
    super::auth::require_admin(&caller, "registering tools")?;
    let dry_run = q?.0.dry_run;
    let _admin = d.admin.lock().await;
    let a = admit(&d, r, "Registered", dry_run).await?;
    let test_call = TestCall { status: a.status, elapsed_ms: a.elapsed_ms, response: a.response };
    if dry_run {
        return Ok((
            StatusCode::OK,
            Json(Registered { id: a.id, status: None, dry_run: Some(true), output_fields: a.output_fields, test_call }),
        ));
    }
    d.reload().await?;
    d.audit(&caller, "tool.register", &a.id, json!({})).await;
    Ok((
        StatusCode::CREATED,
        Json(Registered {
            id: a.id,
            status: Some(STATUS_ACTIVE),
            dry_run: None,
            output_fields: a.output_fields,
            test_call,
        }),
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Patch {
    /// `active`, or `invalid` (it leaves search; memories using it are deleted).
    #[serde(default)]
    status: Option<String>,
    /// Calls to this API wait for a person's approval (anything that books, pays or sends).
    #[serde(default)]
    requires_approval: Option<bool>,
    /// Why (kept on the API node as `status_reason`).
    #[serde(default)]
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// What a patch changed.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Patched {
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    requires_approval: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    /// Long-term memories deleted because they used it (with `status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    memories_deleted: Option<usize>,
}

/// Set an API's status and/or whether its calls wait for approval (administrators).
#[utoipa::path(patch, path = "/v1/tools/{id}", tag = "tools", params(("id" = String, Path, description = "`category/tool/api`")), request_body = Patch,
    responses((status = 200, description = "updated", body = Patched)))]
pub(super) async fn patch_tool(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    ApiJson(p): ApiJson<Patch>,
) -> Result<Json<Patched>, ApiError> {
    super::auth::require_admin(&caller, "changing tools")?;
    if p.status.is_none() && p.requires_approval.is_none() {
        return Err(ApiError::invalid("give `status` and/or `requires_approval`"));
    }
    if let Some(st) = &p.status {
        if st != STATUS_ACTIVE && st != STATUS_INVALID {
            return Err(ApiError::invalid(format!("status: `{st}` is not `{STATUS_ACTIVE}` or `{STATUS_INVALID}`")));
        }
    }
    let reason = p.reason.as_deref().map(str::trim).filter(|r| !r.is_empty()).unwrap_or("set by an operator");
    if reason.chars().count() > 500 {
        return Err(ApiError::invalid("reason: at most 500 characters"));
    }
    let _admin = d.admin.lock().await;
    let mut out = Patched { id: id.clone(), requires_approval: None, status: None, memories_deleted: None };
    if let Some(on) = p.requires_approval {
        if !d.engine().graph().apis.contains_key(&id) {
            return Err(ApiError::not_found(format!("no API {id}")));
        }
        d.state.set_requires_approval(&id, on, &caller.name).await?;
        d.sync_state().await?;
        d.audit(&caller, "tool.requires_approval", &id, json!({"on": on})).await;
        out.requires_approval = Some(on);
    }
    if let Some(status) = &p.status {
        let change = StatusChange {
            id: id.clone(),
            status: status.clone(),
            reason: reason.to_string(),
            since: now_rfc3339(),
            probe: None,
        };
        if !d.stack.store.set_api_status(&change).await? {
            return Err(ApiError::not_found(format!("no API {id}")));
        }
        d.health.reset(&id);
        tracing::warn!(api = %id, status = %status, reason, "API status changed");
        let forgotten = if status == STATUS_INVALID { d.stack.memory.forget_api(&id).await? } else { 0 };
        d.reload().await?;
        d.audit(&caller, "tool.status", &id, json!({"status": status, "reason": reason})).await;
        out.status = Some(status.clone());
        out.memories_deleted = Some(forgotten);
    }
    Ok(Json(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(url: &str) -> Registration {
        Registration {
            name: "getWeather".into(),
            description: String::new(),
            tool: None,
            tool_description: String::new(),
            category: None,
            method: "GET".into(),
            url: url.into(),
            parameters: vec![ParamDoc {
                name: "city".into(),
                ty: "string".into(),
                description: String::new(),
                required: true,
                default: None,
            }],
            output_schema: None,
            example: None,
        }
    }

    #[test]
    fn validation_names_every_problem() {
        assert!(validate(&reg("https://api.example.com/weather/{city}")).is_ok());
        let mut r = reg("ftp://x/{day}");
        r.method = "TRACE".into();
        r.parameters.push(ParamDoc {
            name: "city".into(),
            ty: "blob".into(),
            description: String::new(),
            required: false,
            default: None,
        });
        r.example = Some(Map::from_iter([("town".to_string(), json!("x"))]));
        let e = validate(&r).unwrap_err();
        assert_eq!(e.code, "invalid_tool");
        for want in ["method", "scheme", "declared twice", "parameters[1].type", "{day}", "example.town"] {
            assert!(e.message.contains(want), "{want} in {}", e.message);
        }
        assert!(validate(&reg("https://user:pw@example.com/")).unwrap_err().message.contains("credentials"));
    }
}
