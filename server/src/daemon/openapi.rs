//! `GET /openapi.json`: the daemon's own API, described as OpenAPI 3.1.

use axum::Json;
use serde_json::{json, Value};

fn err(desc: &str) -> Value {
    json!({"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

pub(super) async fn document() -> Json<Value> {
    let errors = json!({
        "400": err("Invalid request"), "401": err("Missing or invalid API key"), "404": err("Not found"),
        "413": err("Body too large"), "429": err("Rate limited (Retry-After)"), "503": err("Busy, draining, or the graph store cannot be reached (`graph_unavailable`); Retry-After"),
        "504": err("Timed out")
    });
    let with = |ok: Value| {
        let mut r = errors.as_object().cloned().unwrap_or_default();
        if let Value::Object(o) = ok {
            r.extend(o);
        }
        Value::Object(r)
    };
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "toolgraph", "version": env!("CARGO_PKG_VERSION"), "description": "Plans and executes chains of API tools over a tool graph learned from trajectories."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}, "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}},
            "schemas": {
                "Error": {"type": "object", "required": ["message", "code", "type"], "properties": {"message": {"type": "string"}, "code": {"type": "string"}, "type": {"type": "string"}}},
                "OrchestrateRequest": {"type": "object", "required": ["request"], "additionalProperties": false, "properties": {
                    "request": {"type": "string", "maxLength": 4000}, "session_id": {"type": "string"},
                    "given": {"type": "object", "description": "values for parameters (answers to needs_input)"},
                    "stream": {"type": "boolean", "description": "stream trace steps as Server-Sent Events (events: run, step, result, error)"},
                    "planner": {"enum": ["deterministic", "llm"], "description": "who decides this run (default: the daemon's planner)"},
                    "model": {"type": "string", "description": "for the llm planner: a configured model (GET /v1/models); default llm.default"},
                    "mode": {"enum": ["graph", "plan", "dfs-no-graph", "retrieve-greedy"], "description": "plan: one plan from the solution library, executed, falling back to the graph search from a failing step"},
                    "backward": {"type": "boolean", "description": "target first: call the API that answers, complete its inputs backwards (Reverse Chain)"}}},
                "RunResult": {"type": "object", "properties": {
                    "run_id": {"type": "string"}, "session_id": {"type": "string"}, "request": {"type": "string"},
                    "status": {"enum": ["answered", "partial", "gave_up", "needs_input"]}, "answer": {"type": "string"},
                    "chain": {"type": "array"}, "needs_input": {"type": ["object", "null"]}, "judgement": {"type": ["object", "null"]},
                    "stats": {"type": "object"}, "trace": {"type": "array"}}},
                "Registration": {"type": "object", "required": ["name", "url"], "additionalProperties": false, "properties": {
                    "name": {"type": "string"}, "description": {"type": "string"}, "tool": {"type": "string"}, "tool_description": {"type": "string"},
                    "category": {"type": "string"}, "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]}, "url": {"type": "string", "format": "uri"},
                    "parameters": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "description": {"type": "string"}, "required": {"type": "boolean"}, "default": {}}}},
                    "output_schema": {}, "example": {"type": "object"}}}
            }
        },
        "security": [{"bearer": []}, {"apiKey": []}],
        "paths": {
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": {"description": "alive"}}}},
            "/readyz": {"get": {"summary": "Readiness: graph and vector stores reachable, not draining", "security": [], "responses": {"200": {"description": "ready"}, "503": err("not ready")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "security": [], "responses": {"200": {"description": "text exposition"}}}},
            "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI 3.1"}}}},
            "/v1/orchestrate": {"post": {"summary": "Plan and execute a request (JSON, or SSE with Accept: text/event-stream or ?stream=true)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OrchestrateRequest"}}}},
                "responses": with(json!({"200": {"description": "the run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}}, "text/event-stream": {}}}}))}},
            "/v1/models": {"get": {"summary": "The configured LLMs (name, model, endpoint, sampling; never keys) and the default", "responses": with(json!({"200": {"description": "models"}}))}},
            "/v1/runs/{id}": {"get": {"summary": "A past run with its trace", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "the run"}}))}},
            "/v1/sessions": {"post": {"summary": "Start a conversation", "responses": with(json!({"201": {"description": "session_id"}}))}},
            "/v1/sessions/{id}": {
                "get": {"summary": "A conversation's turns", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "turns"}}))},
                "delete": {"summary": "End a conversation", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"204": {"description": "deleted"}}))}},
            "/v1/tools/search": {"get": {"summary": "Search APIs (hybrid retrieval)", "parameters": [
                {"name": "q", "in": "query", "required": true, "schema": {"type": "string"}}, {"name": "k", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
                {"name": "category", "in": "query", "schema": {"type": "string"}}, {"name": "tool", "in": "query", "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "ranked APIs"}}))}},
            "/v1/tools": {"post": {"summary": "Register an API: validated, URL checked, test-called, then added to graph and index",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Registration"}}}},
                "responses": with(json!({"201": {"description": "admitted"}, "422": err("invalid, refused URL or failed test call")}))}},
            "/v1/tools/{id}": {
                "get": {"summary": "An API of the graph", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "the API"}}))},
                "patch": {"summary": "Set an API's status (invalid: leaves search; memories using it are deleted)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {"status": {"enum": ["active", "invalid"]}}}}}},
                    "responses": with(json!({"200": {"description": "updated"}}))}},
            "/v1/tools/import-openapi": {"post": {"summary": "Import an OpenAPI 3 document (JSON or YAML): every operation goes through registration",
                "parameters": [{"name": "category", "in": "query", "schema": {"type": "string"}}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}, "application/yaml": {"schema": {"type": "object"}}}},
                "responses": with(json!({"200": {"description": "admitted and skipped operations"}}))}},
            "/v1/graph/cypher": {"post": {"summary": "Read-only, parameterized Cypher (FalkorDB, Neo4j); row and time limits",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}, "params": {"type": "object"}}}}}},
                "responses": with(json!({"200": {"description": "columns and rows"}, "501": err("the embedded store has no Cypher")}))}}
        }
    }))
}
