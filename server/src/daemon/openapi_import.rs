//! `POST /v1/tools/import-openapi`: an OpenAPI 3 document (JSON or YAML) becomes one
//! [`Registration`] per operation, each through the same admission as `POST /v1/tools`
//! (validated, SSRF-checked, test-called).

use super::error::ApiError;
use super::shared::Daemon;
use super::tools::{admit, Registration};
use crate::state::Caller;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use toolgraph_schema::ParamDoc;

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
pub(super) async fn import_openapi(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<ImportQuery>, QueryRejection>,
    headers: axum::http::HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Json<ImportReport>, ApiError> {
    super::auth::require_admin(&caller, "importing tools")?;
    let q = q?.0;
    let body = body?;
    let ty = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let doc: Value = if ty.contains("yaml") {
        serde_norway::from_slice(&body).map_err(|e| ApiError::invalid(format!("invalid YAML body: {e}")))?
    } else if ty.contains("json") {
        serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))?
    } else {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the OpenAPI document as application/json or application/yaml",
        ));
    };
    let (registrations, mut skipped) = from_openapi(&doc, q.category.as_deref())?;
    if q.dry_run {
        let ops: Vec<Value> = registrations
            .iter()
            .map(|(op, r)| json!({"operation": op, "name": r.name, "tool": r.tool, "method": r.method.to_uppercase(), "url": r.url, "description": r.description, "parameters": r.parameters, "needs_example": r.parameters.iter().any(|p| p.required && p.default.as_ref().is_none_or(Value::is_null)) && r.example.is_none()}))
            .collect();
        return Ok(Json(ImportReport { dry_run: Some(true), operations: Some(ops), admitted: None, skipped }));
    }
    let only: Option<HashSet<String>> =
        q.only.as_deref().map(|o| o.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect());
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

/// The JSON body's properties of operation `op` as parameters (with their examples).
fn body_params(doc: &Value, op: &Value, params: &mut Vec<ParamDoc>, example: &mut Map<String, Value>) {
    if let Some(body) = op.pointer("/requestBody/content/application~1json/schema") {
        let body = inline(doc, body, 0);
        let required: HashSet<&str> =
            body.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        for (name, s) in body.get("properties").and_then(Value::as_object).into_iter().flatten() {
            if let Some(ex) = s.get("example").or_else(|| s.get("default")) {
                example.insert(name.clone(), ex.clone());
            }
            params.push(ParamDoc {
                name: name.clone(),
                ty: toolgraph_schema::schema_type(s),
                description: s.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                required: required.contains(name.as_str()),
                default: s.get("default").cloned(),
            });
        }
    }
}

/// The operations of an OpenAPI 3 document as registrations (with example arguments from the
/// document's `example`/`default` values), and the ones that cannot be registered, with why.
pub fn from_openapi(doc: &Value, category: Option<&str>) -> Result<Imported, ApiError> {
    let version = doc.get("openapi").and_then(Value::as_str).unwrap_or_default();
    if !version.starts_with('3') {
        return Err(ApiError::unprocessable("invalid_openapi", "not an OpenAPI 3 document (`openapi: 3.x` missing)"));
    }
    let base =
        doc.pointer("/servers/0/url").and_then(Value::as_str).unwrap_or_default().trim_end_matches('/').to_string();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(ApiError::unprocessable("invalid_openapi", "servers[0].url must be an absolute http(s) URL"));
    }
    let title = doc.pointer("/info/title").and_then(Value::as_str).unwrap_or("Imported API").to_string();
    let tool_description = doc
        .pointer("/info/description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(4000)
        .collect::<String>();
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .ok_or_else(|| ApiError::unprocessable("invalid_openapi", "the document has no `paths`"))?;
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
            let listed: Vec<Value> = shared
                .iter()
                .chain(op.get("parameters").and_then(Value::as_array).into_iter().flatten())
                .cloned()
                .collect();
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
                params.push(ParamDoc {
                    name,
                    ty: toolgraph_schema::schema_type(schema),
                    description: p.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                    required,
                    default: schema.get("default").cloned(),
                });
            }
            body_params(doc, op, &mut params, &mut example);
            if let Some(p) = problem {
                skipped.push(json!({"operation": op_name, "code": "unsupported_parameter", "reason": p}));
                continue;
            }
            let output = ["200", "201", "default"]
                .iter()
                .find_map(|c| op.pointer(&format!("/responses/{c}")))
                .map(|r| deref(doc, r))
                .and_then(|r| r.pointer("/content/application~1json"))
                .and_then(|c| c.get("schema").or_else(|| c.get("example")))
                .map(|s| inline(doc, s, 0));
            let name = op
                .get("operationId")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{method}_{}", path.trim_matches('/').replace(['/', '{', '}'], "_")));
            let description = [op.get("summary"), op.get("description")]
                .iter()
                .flatten()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join(". ")
                .chars()
                .take(4000)
                .collect();
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
        assert_eq!(toolgraph_schema::output_fields(list.output_schema.as_ref().unwrap()), vec!["id", "name"]);
        assert_eq!(regs[1].1.method, "POST");
        assert!(regs[1].1.parameters[0].required);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0]["reason"].as_str().unwrap().contains("X-Key"));
        assert!(from_openapi(&json!({"swagger": "2.0"}), None).is_err());
    }
}
