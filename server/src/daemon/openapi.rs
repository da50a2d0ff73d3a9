//! `GET /openapi.json`: the daemon's HTTP API as OpenAPI 3.1, generated from the handlers.
//!
//! Every operation comes from its handler's `#[utoipa::path]` (registered with its route in
//! [`super::routes`]), its bodies from the request and response types the handler takes and returns.
//! This module adds what the layers in front of every handler answer — the error contract's
//! statuses (401 and 403 from `authorize`, 413 from the body limit, 415 and 400 from the JSON and
//! query extractors, 429 from the rate limiter, 503 when busy or a store is down, 504 from the
//! time limit) — and the security schemes.

use super::error::ErrorBody;
use serde_json::{json, Map, Value};
use utoipa::{OpenApi, PartialSchema};

/// The operations of the two wildcard routes (`/v1/tools/{*id}`, `/v1/credentials/{*scope}`):
/// axum needs `{*id}` to take ids with `/` in them, OpenAPI writes the parameter `{id}`.
#[derive(OpenApi)]
#[openapi(paths(
    super::tools::get_tool,
    super::tools::patch_tool,
    super::accounts::put_credentials,
    super::accounts::delete_credentials
))]
struct WildcardRoutes;

/// The document of the routes' operations (`doc`, from [`super::routes`]), completed: the wildcard
/// routes, the layers' errors, the security schemes.
pub(super) fn build(mut doc: utoipa::openapi::OpenApi) -> Value {
    doc.merge(WildcardRoutes::openapi());
    let mut doc = serde_json::to_value(&doc).unwrap_or_default();
    doc["info"] = json!({
        "title": "toolgraph",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Plans and executes chains of API tools over a tool graph learned from trajectories. Every error answers {message, code, type}.",
    });
    doc["security"] = json!([{"bearer": []}, {"apiKey": []}, {"consoleCookie": []}]);
    let components = doc["components"].as_object_mut().map(std::mem::take).unwrap_or_default();
    let mut components = Value::Object(components);
    components["schemas"]["Error"] = serde_json::to_value(ErrorBody::schema()).unwrap_or_default();
    components["securitySchemes"] = json!({
        "bearer": {"type": "http", "scheme": "bearer"},
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        "consoleCookie": {"type": "apiKey", "in": "cookie", "name": "tg_session", "description": "a console login (POST /v1/login); state-changing requests also send its CSRF token in X-CSRF-Token"},
    });
    doc["components"] = components;
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            for (method, op) in item.as_object_mut().into_iter().flatten() {
                if let Some(op) = op.as_object_mut() {
                    add_layer_errors(path, method, op);
                }
            }
        }
    }
    doc
}

fn error(description: &str, retry_after: bool) -> Value {
    let mut r = json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    if retry_after {
        r["headers"] = json!({"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}});
    }
    r
}

/// The statuses the layers in front of a handler answer with, added where the handler's own
/// annotation does not name them.
fn add_layer_errors(path: &str, method: &str, op: &mut Map<String, Value>) {
    let public = op
        .get("security")
        .and_then(Value::as_array)
        .is_some_and(|s| s.iter().all(|r| r.as_object().is_some_and(Map::is_empty)));
    let body = op.contains_key("requestBody");
    let params = op.get("parameters").and_then(Value::as_array).is_some_and(|p| !p.is_empty());
    let in_path = path.contains('{');
    let v1 = path.starts_with("/v1/");
    let mut add: Vec<(&str, Value)> = Vec::new();
    if body || params {
        add.push((
            "400",
            error("invalid request: a parameter or the body is malformed or out of range (`invalid_request`)", false),
        ));
    }
    if !public || path == "/v1/login" {
        add.push(("401", error("missing or invalid API key, login or password (`authentication_error`)", false)));
    }
    if !public || path == "/v1/logout" {
        add.push(("403", error("forbidden: administrators only, another user's resource, or a console login without its CSRF token (`permission_error`)", false)));
    }
    if in_path {
        add.push(("404", error("not found (`not_found`)", false)));
    }
    if body {
        add.push(("413", error("the body is larger than server.max_body_bytes (`body_too_large`)", false)));
        add.push((
            "415",
            error("the body is not of a content type the operation takes (`unsupported_media_type`)", false),
        ));
    }
    if !public || path == "/v1/login" {
        add.push(("429", error("rate limited (`rate_limited`); Retry-After", true)));
    }
    if v1 || path == "/readyz" {
        add.push(("503", error("busy, draining, or a store is unavailable (`busy`, `draining`, `graph_unavailable`, `state_unavailable`, `backend_unavailable`); Retry-After", true)));
    }
    if v1 && method != "delete" {
        add.push(("504", error("the request took longer than server.request_timeout_ms (`timeout`)", false)));
    }
    let responses = op.entry("responses").or_insert_with(|| json!({}));
    if let Some(r) = responses.as_object_mut() {
        for (status, response) in add {
            r.entry(status).or_insert(response);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::routes::spec;

    const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

    fn operations() -> Vec<(String, String, Value)> {
        let doc = spec();
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for m in METHODS {
                if let Some(op) = item.get(m) {
                    out.push((path.clone(), m.to_string(), op.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn every_operation_documents_a_success_and_its_errors_and_every_body_has_a_schema() {
        let ops = operations();
        assert!(ops.len() >= 45, "{} operations", ops.len());
        for (path, m, op) in &ops {
            let responses = op["responses"].as_object().unwrap();
            let ok: Vec<&String> = responses.keys().filter(|s| s.starts_with('2')).collect();
            assert!(!ok.is_empty(), "{m} {path}: no success response");
            for s in ok {
                let r = &responses[s];
                if s != "204" {
                    assert!(
                        r["content"].as_object().is_some_and(|c| c.values().all(|c| c.get("schema").is_some())),
                        "{m} {path} {s}: a success without a schema: {r}"
                    );
                }
            }
            if path.starts_with("/v1/") && path != "/v1/login" && path != "/v1/logout" {
                for s in ["401", "403", "503"] {
                    assert!(responses.contains_key(s), "{m} {path}: {s} undocumented");
                }
            }
            for (s, r) in responses.iter().filter(|(s, _)| s.starts_with('4') || s.starts_with('5')) {
                if path != "/" {
                    assert_eq!(
                        r["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/Error",
                        "{m} {path} {s}"
                    );
                }
            }
            assert!(op["summary"].as_str().is_some_and(|s| !s.is_empty()), "{m} {path}: no summary");
        }
    }

    #[test]
    fn the_document_names_every_route_and_the_wildcard_routes_as_axum_serves_them() {
        let doc = spec();
        assert_eq!(doc["openapi"], "3.1.0");
        let paths = doc["paths"].as_object().unwrap();
        for (p, m) in [
            ("/v1/tools/{id}", "get"),
            ("/v1/tools/{id}", "patch"),
            ("/v1/credentials/{scope}", "put"),
            ("/v1/credentials/{scope}", "delete"),
            ("/v1/orchestrate", "post"),
            ("/healthz", "get"),
            ("/openapi.json", "get"),
        ] {
            assert!(paths.get(p).and_then(|i| i.get(m)).is_some(), "{m} {p} missing");
        }
        // Every schema a document refers to is in it.
        let text = doc.to_string();
        for r in text.split("\"#/components/schemas/").skip(1) {
            let name = &r[..r.find('"').unwrap()];
            assert!(doc["components"]["schemas"].get(name).is_some(), "{name} is referred to and not defined");
        }
        // The request types' bounds reach the document (what the fuzzer generates from).
        assert_eq!(doc["components"]["schemas"]["OrchestrateRequest"]["properties"]["request"]["maxLength"], 4000);
        assert_eq!(doc["components"]["schemas"]["OrchestrateRequest"]["additionalProperties"], false);
    }

    #[test]
    fn the_documented_names_of_modes_planners_and_statuses_are_the_ones_the_daemon_takes() {
        let doc = spec();
        let names = |schema: &str| -> Vec<String> {
            doc["components"]["schemas"][schema]["enum"]
                .as_array()
                .unwrap_or_else(|| panic!("{schema}: {}", doc["components"]["schemas"][schema]))
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names("ModeName"), toolgraph_schema::Mode::names().map(str::to_string).to_vec());
        assert_eq!(names("PlannerName"), toolgraph_schema::PlannerKind::names().map(str::to_string).to_vec());
        assert_eq!(names("RunStatus"), super::super::runs::RunStatus::ALL.map(|s| s.as_str().to_string()).to_vec());
    }

    #[test]
    fn a_run_body_has_exactly_the_fields_its_contract_names() {
        let doc = spec();
        let props: std::collections::BTreeSet<String> =
            doc["components"]["schemas"]["RunResult"]["properties"].as_object().unwrap().keys().cloned().collect();
        use toolgraph_engine::run::{RunReport, RunStats, Status};
        let report = RunReport {
            request: String::new(),
            status: Status::Answered,
            answer: String::new(),
            chain: Vec::new(),
            needs_input: None,
            judgement: None,
            trace: Vec::new(),
            stats: RunStats::default(),
            responses: Vec::new(),
        };
        use super::super::runs::{result_body, RunResult};
        let keys = |v: Value| v.as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<String>>();
        // A finished run's body has the fields every run has, `null` when empty.
        let body = result_body("run_1", "ses_1", &report);
        let always = ["run_id", "session_id", "status", "answer", "chain", "needs_input", "judgement", "stats"];
        assert_eq!(keys(body.to_value()), always.map(String::from).into_iter().collect());
        // With everything set (the stored run, a paused one, an error), exactly the contract's.
        let full = RunResult {
            request: Some("r".into()),
            trace: Some(Vec::new()),
            pending: Some(json!({"call_key": "k"})),
            error: Some(super::super::error::ApiError::invalid("x").error_body()),
            user_id: Some("u".into()),
            created_ms: Some(1),
            ..body
        };
        assert_eq!(props, keys(full.to_value()));
        // And what is stored reads back as the same run.
        let back: RunResult = serde_json::from_value(full.to_value()).unwrap();
        assert_eq!(back.to_value(), full.to_value());
    }
}
