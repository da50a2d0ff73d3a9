//! Tools: search, registration (validated, SSRF-checked and test-called before admission, thesis
//! §5.2.14), status changes (an invalidated API leaves search and the long-term memories that use
//! it are deleted) and OpenAPI 3 import (each operation goes through the same admission).

use super::error::{ApiError, ApiJson};
use super::Daemon;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use crate::state::Caller;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use toolgraph_engine::exec::{kind, response_problem, CallSpec};
use toolgraph_engine::graph::ApiUpsert;
use toolgraph_engine::retrieval::hybrid::Method;
use toolgraph_engine::retrieval::Filter;
use toolgraph_schema::{api_id, output_fields, ApiDoc, ParamDoc, StatusChange, STATUS_ACTIVE, STATUS_INVALID};
use toolgraph_engine::run::health::now_rfc3339;

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
pub(super) async fn search(State(d): State<Arc<Daemon>>, q: Result<Query<SearchQuery>, QueryRejection>) -> Result<Json<SearchResults>, ApiError> {
    let q = q?.0;
    let text = q.q.filter(|t| !t.trim().is_empty()).ok_or_else(|| ApiError::invalid("`q` (the text to search for) is required"))?;
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
    let a = engine.graph().apis.get(&id).ok_or_else(|| ApiError::not_found(format!("no API {id} (ids look like category/tool/api)")))?;
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

const TYPES: &[&str] = &["string", "str", "text", "enum", "number", "float", "double", "integer", "int", "boolean", "bool", "array", "list", "object", "dict", "date", "datetime"];
const MAX_PARAMS: usize = 64;

/// Check a registration; the problems, all of them, by field.
fn validate(r: &Registration) -> Result<(), ApiError> {
    let mut problems = Vec::new();
    if r.name.trim().is_empty() || r.name.len() > 200 {
        problems.push("name: 1..200 characters".to_string());
    }
    // Names and descriptions people read hold no invisible or reordering characters.
    for (f, v) in [("name", Some(&r.name)), ("tool", r.tool.as_ref()), ("category", r.category.as_ref()), ("description", Some(&r.description)), ("tool_description", Some(&r.tool_description))] {
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
            problems.push(format!("parameters[{i}].name: holds an invisible or text-reordering character (U+{:04X})", c as u32));
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
struct Admitted {
    id: String,
    output_fields: Vec<String>,
    status: u16,
    elapsed_ms: f64,
    response: Value,
}

/// Validate, test-call and write one API to the graph (not yet re-indexed); with `dry_run`, stop
/// after the test call (nothing is written).
async fn admit(d: &Daemon, r: Registration, default_category: &str, dry_run: bool) -> Result<Admitted, ApiError> {
    validate(&r)?;
    let category = r.category.clone().unwrap_or_else(|| default_category.to_string());
    let tool = r.tool.clone().unwrap_or_else(|| r.name.clone());
    let id = api_id(&category, &tool, &r.name);
    reqwest::Url::parse(&r.url).map_err(|e| ApiError::unprocessable("invalid_tool", format!("url: {e}")))?;
    // Checked where calls really go (after the deployment's rewrites, e.g. to a replay sandbox).
    let url = reqwest::Url::parse(&d.stack.executor.rewritten(&r.url)).map_err(|e| ApiError::unprocessable("invalid_tool", format!("url (rewritten): {e}")))?;
    d.stack.executor.guard().check_url(&url).await.map_err(|e| ApiError::unprocessable("url_refused", format!("url: {e}")))?;
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
        return Err(ApiError::unprocessable("example_required", format!("the test call needs values for {}: give them in `example`", missing.join(", "))));
    }
    let spec = CallSpec { api_id: id.clone(), method: r.method.to_uppercase(), url: r.url.clone(), params: r.parameters.clone() };
    let outcome = d
        .stack
        .executor
        .call(&spec, &args, &HashMap::<String, Value>::new())
        .await
        .map_err(|e| ApiError::unprocessable("test_call_failed", format!("the test call of {} failed: {e}", r.name)))?;
    if let Some(problem) = response_problem(&outcome.response) {
        return Err(ApiError::unprocessable("test_call_failed", format!("the test call of {} answered with an error: {problem}", r.name)));
    }
    let mut fields = r.output_schema.as_ref().map(output_fields).unwrap_or_default();
    if fields.is_empty() {
        fields = output_fields(&outcome.response);
    }
    if dry_run {
        return Ok(Admitted { id, output_fields: fields, status: outcome.status, elapsed_ms: outcome.elapsed_ms, response: preview(&outcome.response) });
    }
    let params: Vec<ParamDoc> = r.parameters.iter().map(|p| ParamDoc { ty: if p.ty.is_empty() { "string".into() } else { kind(&p.ty).to_string() }, ..p.clone() }).collect();
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
    let change = StatusChange { id: id.clone(), status: STATUS_ACTIVE.into(), reason: format!("registered; its test call answered HTTP {}", outcome.status), since: now_rfc3339(), probe: Some(Value::Object(outcome.arguments.clone()).to_string()) };
    d.stack.store.set_api_status(&change).await?;
    d.health.reset(&id);
    Ok(Admitted { id, output_fields: fields, status: outcome.status, elapsed_ms: outcome.elapsed_ms, response: preview(&outcome.response) })
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
pub(super) async fn register(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, q: Result<Query<DryRun>, QueryRejection>, ApiJson(r): ApiJson<Registration>) -> Result<(StatusCode, Json<Registered>), ApiError> {
    super::require_admin(&caller, "registering tools")?;
    let dry_run = q?.0.dry_run;
    let _admin = d.admin.lock().await;
    let a = admit(&d, r, "Registered", dry_run).await?;
    let test_call = TestCall { status: a.status, elapsed_ms: a.elapsed_ms, response: a.response };
    if dry_run {
        return Ok((StatusCode::OK, Json(Registered { id: a.id, status: None, dry_run: Some(true), output_fields: a.output_fields, test_call })));
    }
    d.reload().await?;
    d.audit(&caller, "tool.register", &a.id, json!({})).await;
    Ok((StatusCode::CREATED, Json(Registered { id: a.id, status: Some(STATUS_ACTIVE), dry_run: None, output_fields: a.output_fields, test_call })))
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
pub(super) async fn patch_tool(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>, ApiJson(p): ApiJson<Patch>) -> Result<Json<Patched>, ApiError> {
    super::require_admin(&caller, "changing tools")?;
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
        let change = StatusChange { id: id.clone(), status: status.clone(), reason: reason.to_string(), since: now_rfc3339(), probe: None };
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

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ImportQuery {
    /// The category of the imported APIs (default `Imported`).
    category: Option<String>,
    /// List the document's operations (nothing is called or written).
    #[serde(default)]
    dry_run: bool,
    /// Admit only these operations (comma-separated `METHOD path` or operationIds, as a dry run
    /// lists them).
    #[serde(default)]
    only: Option<String>,
}

const MAX_OPERATIONS: usize = 200;

/// What an import did (or, for a dry run, would do).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ImportReport {
    /// True for a dry run (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    dry_run: Option<bool>,
    /// A dry run: the document's operations as they would be registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    operations: Option<Vec<Value>>,
    /// Admitted operations: operation, id, output_fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    admitted: Option<Vec<Value>>,
    /// Skipped operations: operation, code, reason.
    skipped: Vec<Value>,
}

/// Import an OpenAPI 3 document (JSON or YAML): every operation goes through registration (administrators).
#[utoipa::path(post, path = "/v1/tools/import-openapi", tag = "tools", params(ImportQuery),
    request_body(description = "an OpenAPI 3 document", content((Object = "application/json"), (Object = "application/yaml"))),
    responses((status = 200, description = "admitted and skipped operations", body = ImportReport),
        (status = 422, description = "not an OpenAPI 3 document this can import (`invalid_openapi`)", body = super::error::ErrorBody)))]
pub(super) async fn import_openapi(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, q: Result<Query<ImportQuery>, QueryRejection>, headers: axum::http::HeaderMap, body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>) -> Result<Json<ImportReport>, ApiError> {
    super::require_admin(&caller, "importing tools")?;
    let q = q?.0;
    let body = body?;
    let ty = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_ascii_lowercase();
    let doc: Value = if ty.contains("yaml") {
        serde_norway::from_slice(&body).map_err(|e| ApiError::invalid(format!("invalid YAML body: {e}")))?
    } else if ty.contains("json") {
        serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))?
    } else {
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "send the OpenAPI document as application/json or application/yaml"));
    };
    let (registrations, mut skipped) = from_openapi(&doc, q.category.as_deref())?;
    if q.dry_run {
        let ops: Vec<Value> = registrations
            .iter()
            .map(|(op, r)| json!({"operation": op, "name": r.name, "tool": r.tool, "method": r.method.to_uppercase(), "url": r.url, "description": r.description, "parameters": r.parameters, "needs_example": r.parameters.iter().any(|p| p.required && p.default.as_ref().is_none_or(Value::is_null)) && r.example.is_none()}))
            .collect();
        return Ok(Json(ImportReport { dry_run: Some(true), operations: Some(ops), admitted: None, skipped }));
    }
    let only: Option<HashSet<String>> = q.only.as_deref().map(|o| o.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect());
    let _admin = d.admin.lock().await;
    let mut admitted = Vec::new();
    for (op, r) in registrations {
        if let Some(only) = &only {
            if !only.contains(&op) {
                skipped.push(json!({"operation": op, "code": "not_selected", "reason": "not among `only`"}));
                continue;
            }
        }
        match admit(&d, r, "Imported", false).await {
            Ok(a) => admitted.push(json!({"operation": op, "id": a.id, "output_fields": a.output_fields})),
            Err(e) => skipped.push(json!({"operation": op, "code": e.code, "reason": e.message})),
        }
    }
    if !admitted.is_empty() {
        d.reload().await?;
    }
    Ok(Json(ImportReport { dry_run: None, operations: None, admitted: Some(admitted), skipped }))
}

/// Follow a local `$ref` (`#/components/...`), at most a few hops.
fn deref<'a>(doc: &'a Value, mut v: &'a Value) -> &'a Value {
    for _ in 0..8 {
        match v.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(ptr) => match doc.pointer(ptr) {
                Some(t) => v = t,
                None => return v,
            },
            None => return v,
        }
    }
    v
}

/// Inline `$ref`s of a schema (bounded depth), so field extraction sees the real properties.
fn inline(doc: &Value, v: &Value, depth: usize) -> Value {
    let v = deref(doc, v);
    if depth > 6 {
        return v.clone();
    }
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), inline(doc, x, depth + 1))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(|x| inline(doc, x, depth + 1)).collect()),
        other => other.clone(),
    }
}


/// Registrations by operation (`GET /pets`), and the operations skipped with why.
pub type Imported = (Vec<(String, Registration)>, Vec<Value>);

/// The operations of an OpenAPI 3 document as registrations (with example arguments from the
/// document's `example`/`default` values), and the ones that cannot be registered, with why.
pub fn from_openapi(doc: &Value, category: Option<&str>) -> Result<Imported, ApiError> {
    let version = doc.get("openapi").and_then(Value::as_str).unwrap_or_default();
    if !version.starts_with('3') {
        return Err(ApiError::unprocessable("invalid_openapi", "not an OpenAPI 3 document (`openapi: 3.x` missing)"));
    }
    let base = doc.pointer("/servers/0/url").and_then(Value::as_str).unwrap_or_default().trim_end_matches('/').to_string();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(ApiError::unprocessable("invalid_openapi", "servers[0].url must be an absolute http(s) URL"));
    }
    let title = doc.pointer("/info/title").and_then(Value::as_str).unwrap_or("Imported API").to_string();
    let tool_description = doc.pointer("/info/description").and_then(Value::as_str).unwrap_or_default().chars().take(4000).collect::<String>();
    let paths = doc.get("paths").and_then(Value::as_object).ok_or_else(|| ApiError::unprocessable("invalid_openapi", "the document has no `paths`"))?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (path, item) in paths {
        let item = deref(doc, item);
        let shared: Vec<Value> = item.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
        for method in ["get", "post", "put", "patch", "delete"] {
            let Some(op) = item.get(method) else { continue };
            let op_name = format!("{} {path}", method.to_uppercase());
            if out.len() + skipped.len() >= MAX_OPERATIONS {
                skipped.push(json!({"operation": op_name, "code": "too_many_operations", "reason": format!("at most {MAX_OPERATIONS} operations per import")}));
                continue;
            }
            let mut params: Vec<ParamDoc> = Vec::new();
            let mut example = Map::new();
            let mut problem = None;
            let listed: Vec<Value> = shared.iter().chain(op.get("parameters").and_then(Value::as_array).into_iter().flatten()).cloned().collect();
            for p in &listed {
                let p = deref(doc, p);
                let name = p.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let loc = p.get("in").and_then(Value::as_str).unwrap_or("query");
                let required = p.get("required").and_then(Value::as_bool).unwrap_or(loc == "path");
                if loc == "header" || loc == "cookie" {
                    if required {
                        problem = Some(format!("required {loc} parameter `{name}` (only path, query and JSON body parameters are supported)"));
                    }
                    continue;
                }
                let schema = deref(doc, p.get("schema").unwrap_or(&Value::Null));
                if let Some(ex) = p.get("example").or_else(|| schema.get("example")).or_else(|| schema.get("default")) {
                    example.insert(name.clone(), ex.clone());
                }
                params.retain(|q: &ParamDoc| q.name != name);
                params.push(ParamDoc { name, ty: toolgraph_schema::schema_type(schema), description: p.get("description").and_then(Value::as_str).unwrap_or_default().to_string(), required, default: schema.get("default").cloned() });
            }
            if let Some(body) = op.pointer("/requestBody/content/application~1json/schema") {
                let body = inline(doc, body, 0);
                let required: HashSet<&str> = body.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
                for (name, s) in body.get("properties").and_then(Value::as_object).into_iter().flatten() {
                    if let Some(ex) = s.get("example").or_else(|| s.get("default")) {
                        example.insert(name.clone(), ex.clone());
                    }
                    params.push(ParamDoc { name: name.clone(), ty: toolgraph_schema::schema_type(s), description: s.get("description").and_then(Value::as_str).unwrap_or_default().to_string(), required: required.contains(name.as_str()), default: s.get("default").cloned() });
                }
            }
            if let Some(p) = problem {
                skipped.push(json!({"operation": op_name, "code": "unsupported_parameter", "reason": p}));
                continue;
            }
            let output = ["200", "201", "default"].iter().find_map(|c| op.pointer(&format!("/responses/{c}"))).map(|r| deref(doc, r)).and_then(|r| r.pointer("/content/application~1json")).and_then(|c| c.get("schema").or_else(|| c.get("example"))).map(|s| inline(doc, s, 0));
            let name = op.get("operationId").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("{method}_{}", path.trim_matches('/').replace(['/', '{', '}'], "_")));
            let description = [op.get("summary"), op.get("description")].iter().flatten().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(". ").chars().take(4000).collect();
            out.push((
                op_name,
                Registration {
                    name,
                    description,
                    tool: Some(title.clone()),
                    tool_description: tool_description.clone(),
                    category: category.map(str::to_string),
                    method: method.to_uppercase(),
                    url: format!("{base}{path}"),
                    parameters: params,
                    output_schema: output,
                    example: Some(example),
                },
            ));
        }
    }
    Ok((out, skipped))
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
            parameters: vec![ParamDoc { name: "city".into(), ty: "string".into(), description: String::new(), required: true, default: None }],
            output_schema: None,
            example: None,
        }
    }

    #[test]
    fn validation_names_every_problem() {
        assert!(validate(&reg("https://api.example.com/weather/{city}")).is_ok());
        let mut r = reg("ftp://x/{day}");
        r.method = "TRACE".into();
        r.parameters.push(ParamDoc { name: "city".into(), ty: "blob".into(), description: String::new(), required: false, default: None });
        r.example = Some(Map::from_iter([("town".to_string(), json!("x"))]));
        let e = validate(&r).unwrap_err();
        assert_eq!(e.code, "invalid_tool");
        for want in ["method", "scheme", "declared twice", "parameters[1].type", "{day}", "example.town"] {
            assert!(e.message.contains(want), "{want} in {}", e.message);
        }
        assert!(validate(&reg("https://user:pw@example.com/")).unwrap_err().message.contains("credentials"));
    }

    #[test]
    fn openapi_operations_become_registrations() {
        let doc = json!({
            "openapi": "3.0.3",
            "info": {"title": "Pets", "description": "A pet store"},
            "servers": [{"url": "https://pets.example.com/v1/"}],
            "components": {
                "parameters": {"Limit": {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 10}}},
                "schemas": {"Pet": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}}
            },
            "paths": {
                "/pets": {
                    "get": {"operationId": "listPets", "summary": "List pets", "parameters": [{"$ref": "#/components/parameters/Limit"}],
                            "responses": {"200": {"content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}}}}},
                    "post": {"operationId": "addPet", "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "example": "Rex"}}}}}}}
                },
                "/pets/{petId}": {
                    "get": {"parameters": [{"name": "petId", "in": "path", "schema": {"type": "integer", "example": 7}}, {"name": "X-Key", "in": "header", "required": true}]}
                }
            }
        });
        let (regs, skipped) = from_openapi(&doc, Some("Animals")).unwrap();
        let names: Vec<&str> = regs.iter().map(|(_, r)| r.name.as_str()).collect();
        assert_eq!(names, vec!["listPets", "addPet"]);
        let list = &regs[0].1;
        assert_eq!(list.url, "https://pets.example.com/v1/pets");
        assert_eq!(list.parameters[0].name, "limit");
        assert_eq!(list.parameters[0].ty, "integer");
        assert_eq!(list.example.as_ref().unwrap()["limit"], json!(10));
        assert_eq!(output_fields(list.output_schema.as_ref().unwrap()), vec!["id", "name"]);
        assert_eq!(regs[1].1.method, "POST");
        assert!(regs[1].1.parameters[0].required);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0]["reason"].as_str().unwrap().contains("X-Key"));
        assert!(from_openapi(&json!({"swagger": "2.0"}), None).is_err());
    }
}
