//! `GET /openapi.json`: the daemon's own API, described as OpenAPI 3.1.

use axum::Json;
use serde_json::{json, Value};

fn err(desc: &str) -> Value {
    json!({"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

pub(super) async fn document() -> Json<Value> {
    let errors = json!({
        "400": err("Invalid request"), "401": err("Missing or invalid API key"), "404": err("Not found"),
        "403": err("Forbidden: administrators only (`permission_error`)"), "413": err("Body too large"), "429": err("Rate limited (Retry-After)"), "503": err("Busy, draining, or the graph store cannot be reached (`graph_unavailable`); Retry-After"),
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
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}, "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "consoleCookie": {"type": "apiKey", "in": "cookie", "name": "tg_session", "description": "a console login (POST /v1/login); state-changing requests also send its CSRF token in X-CSRF-Token"}},
            "schemas": {
                "Error": {"type": "object", "required": ["message", "code", "type"], "properties": {"message": {"type": "string"}, "code": {"type": "string"}, "type": {"type": "string"}}},
                "OrchestrateRequest": {"type": "object", "required": ["request"], "additionalProperties": false, "properties": {
                    "request": {"type": "string", "maxLength": 4000}, "session_id": {"type": "string"},
                    "given": {"type": "object", "description": "values for parameters (answers to needs_input)"},
                    "stream": {"type": "boolean", "description": "stream trace steps as Server-Sent Events (events: run, step, result, error)"},
                    "planner": {"enum": toolgraph_schema::PlannerKind::names(), "description": "who decides this run (default: the daemon's planner)"},
                    "model": {"type": "string", "description": "for the llm planner: a configured model (GET /v1/models); default llm.default"},
                    "mode": {"enum": toolgraph_schema::Mode::names(), "description": "plan: one plan from the solution library, executed, falling back to the graph search from a failing step"},
                    "backward": {"type": "boolean", "description": "target first: call the API that answers, complete its inputs backwards (Reverse Chain)"},
                    "dry_run": {"type": "boolean", "description": "plan only: nothing is sent; the chain comes back with its data flow as $varN.field$ references (stats.dry_run); nothing is learned or remembered"}}},
                "RunResult": {"type": "object", "properties": {
                    "run_id": {"type": "string"}, "session_id": {"type": "string"}, "request": {"type": "string"},
                    "status": {"enum": ["running", "awaiting_approval", "answered", "partial", "gave_up", "needs_input", "interrupted", "error"]}, "answer": {"type": "string"},
                    "pending": {"type": "object", "description": "while awaiting_approval: the call (api, name, arguments, call_key)"},
                    "chain": {"type": "array"}, "needs_input": {"type": ["object", "null"]}, "judgement": {"type": ["object", "null"]},
                    "stats": {"type": "object"}, "trace": {"type": "array"}}},
                "Registration": {"type": "object", "required": ["name", "url"], "additionalProperties": false, "properties": {
                    "name": {"type": "string"}, "description": {"type": "string"}, "tool": {"type": "string"}, "tool_description": {"type": "string"},
                    "category": {"type": "string"}, "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]}, "url": {"type": "string", "format": "uri"},
                    "parameters": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "description": {"type": "string"}, "required": {"type": "boolean"}, "default": {}}}},
                    "output_schema": {}, "example": {"type": "object"}}}
            }
        },
        "security": [{"bearer": []}, {"apiKey": []}, {"consoleCookie": []}],
        "paths": {
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": {"description": "alive"}}}},
            "/readyz": {"get": {"summary": "Readiness: graph and vector stores reachable, not draining", "security": [], "responses": {"200": {"description": "ready"}, "503": err("not ready")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "security": [], "responses": {"200": {"description": "text exposition"}}}},
            "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI 3.1"}}}},
            "/": {"get": {"summary": "The web console (built into the binary; 503 with how to build it otherwise)", "security": [], "responses": {"200": {"description": "text/html"}, "503": {"description": "not built"}}}},
            "/v1/login": {"post": {"summary": "Console login: name + password (argon2id) or an API key → an HttpOnly, SameSite=Strict cookie `tg_session` and the CSRF token; rate-limited per address. A daemon that needs no keys answers login_required: false",
                "security": [], "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"name": {"type": "string", "maxLength": 200}, "password": {"type": "string", "maxLength": 200, "writeOnly": true}, "api_key": {"type": "string", "maxLength": 200, "writeOnly": true}}}}}},
                "responses": with(json!({"200": {"description": "{login_required, user, csrf_token, expires_ms} and Set-Cookie"}}))}},
            "/v1/logout": {"post": {"summary": "End this browser's console login", "security": [], "responses": {"204": {"description": "ended; the cookie is cleared"}}}},
            "/v1/mcp-servers": {
                "get": {"summary": "MCP servers whose tools are APIs: transport, connected, last error (administrators)", "responses": with(json!({"200": {"description": "{servers}"}}))},
                "post": {"summary": "Import a Streamable HTTP MCP server's tools as APIs (category mcp, tool = name); stdio servers only from the CLI (administrators)",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["name", "url"], "additionalProperties": false, "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, "url": {"type": "string", "format": "uri"}}}}}},
                    "responses": with(json!({"201": {"description": "{server, admitted, invalidated}"}, "422": err("cannot connect or list its tools (`mcp_unreachable`)")}))}},
            "/v1/categories": {"get": {"summary": "Categories (id, name) with their numbers of tools and APIs", "responses": with(json!({"200": {"description": "{categories}"}}))}},
            "/v1/graph/neighborhood": {"get": {"summary": "An API's (or START's) neighbourhood: top-k successors and predecessors by dynamic weight (NEXT edges with count, static and dynamic weight) and FEEDS edges (shared fields) among them",
                "parameters": [{"name": "id", "in": "query", "schema": {"type": "string", "default": "START"}}, {"name": "k", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8}}],
                "responses": with(json!({"200": {"description": "{center, nodes, edges, successors_total, predecessors_total}"}}))}},
            "/v1/memory": {"get": {"summary": "The long-term memory's (request → chain) entries, filtered by words of the request or API ids (administrators)", "parameters": [{"name": "q", "in": "query", "schema": {"type": "string", "maxLength": 300}}, {"name": "offset", "in": "query", "schema": {"type": "integer"}}, {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 200}}], "responses": with(json!({"200": {"description": "{total, entries}"}}))}},
            "/v1/memory/{id}": {"delete": {"summary": "Delete a stored plan (administrators)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"204": {"description": "deleted"}}))}},
            "/v1/settings": {"get": {"summary": "Run defaults, backends, models and limits (administrators; no secrets)", "responses": with(json!({"200": {"description": "settings"}}))}},
            "/v1/chains/check": {"post": {"summary": "Validate a chain as /v1/chains/execute would (nothing runs); the output fields each step offers to later ones",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["steps"], "properties": {"steps": {"type": "array"}, "request": {"type": "string"}}}}}},
                "responses": with(json!({"200": {"description": "{valid, steps, outputs}"}, "422": err("the chain is invalid (`invalid_chain`), naming the step")}))}},
            "/v1/orchestrate": {"post": {"summary": "Plan and execute a request (JSON, or SSE with Accept: text/event-stream or ?stream=true)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OrchestrateRequest"}}}},
                "responses": with(json!({"200": {"description": "the run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}}, "text/event-stream": {}}}}))}},
            "/v1/models": {"get": {"summary": "The configured LLMs (name, model, endpoint, sampling; never keys) and the default", "responses": with(json!({"200": {"description": "models"}}))}},
            "/v1/me": {"get": {"summary": "Who this key belongs to (user id, name, role)", "responses": with(json!({"200": {"description": "the caller"}}))}},
            "/v1/runs": {"get": {"summary": "The caller's runs, newest first (administrators: user=ID or user=*)", "parameters": [
                {"name": "status", "in": "query", "schema": {"enum": ["running", "awaiting_approval", "answered", "partial", "gave_up", "needs_input", "interrupted", "error"]}},
                {"name": "q", "in": "query", "schema": {"type": "string", "maxLength": 200}, "description": "words of the request"},
                {"name": "tool", "in": "query", "schema": {"type": "string"}, "description": "an API id or a prefix (category/tool)"},
                {"name": "before", "in": "query", "schema": {"type": "string"}, "description": "the `next` cursor of the previous page"},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
                {"name": "user", "in": "query", "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "{runs, next}"}}))}},
            "/v1/runs/{id}": {"get": {"summary": "A run (the caller's own; administrators: any) with its trace; while paused, the pending call", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "the run"}}))}},
            "/v1/runs/{id}/rerun": {"post": {"summary": "Run the same request (or chain) again with the same choices, in a new session", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "the new run"}, "202": {"description": "paused for approval"}}))}},
            "/v1/runs/{id}/approve": {"post": {"summary": "Approve the call a paused run waits on (the owner or an administrator; the first decision wins)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 500}}}}}}, "responses": with(json!({"200": {"description": "decided"}, "409": err("not awaiting approval, or decided already")}))}},
            "/v1/runs/{id}/reject": {"post": {"summary": "Reject it: that branch fails, the search goes on", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 500}}}}}}, "responses": with(json!({"200": {"description": "decided"}, "409": err("not awaiting approval, or decided already")}))}},
            "/v1/chains/execute": {"post": {"summary": "Execute a chain as written (developer mode): steps with API ids and arguments with $varN.field$ references, checked like planned calls; or a saved chain by chain_id",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "object", "required": ["api"], "properties": {"api": {"type": "string"}, "arguments": {"type": "object"}, "for_each": {"type": "string"}, "if": {"type": "object"}}}}, "chain_id": {"type": "string"}, "request": {"type": "string"}, "given": {"type": "object"}, "stream": {"type": "boolean"}}}}}},
                "responses": with(json!({"200": {"description": "the run"}, "202": {"description": "paused for approval"}, "422": err("the chain is invalid (`invalid_chain`)")}))}},
            "/v1/chains": {
                "post": {"summary": "Save a chain as a template (checked first); chain_id updates one", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["name", "steps"], "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "steps": {"type": "array"}, "chain_id": {"type": "string"}}}}}}, "responses": with(json!({"201": {"description": "saved"}, "422": err("invalid chain")}))},
                "get": {"summary": "The caller's saved chains (q: words of name or description)", "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}, {"name": "limit", "in": "query", "schema": {"type": "integer"}}], "responses": with(json!({"200": {"description": "{chains}"}}))}},
            "/v1/chains/{id}": {
                "get": {"summary": "A saved chain", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "the chain"}}))},
                "delete": {"summary": "Delete a saved chain", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"204": {"description": "deleted"}}))}},
            "/v1/users": {
                "get": {"summary": "Users (administrators)", "responses": with(json!({"200": {"description": "{users}"}}))},
                "post": {"summary": "Add a user (administrators); with_key: a first key, shown once", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "role": {"enum": ["admin", "user"]}, "password": {"type": "string", "minLength": 8}, "with_key": {"type": "boolean"}}}}}}, "responses": with(json!({"201": {"description": "the user (and key)"}, "409": err("exists")}))}},
            "/v1/users/{id}/keys": {
                "get": {"summary": "A user's keys, never the keys themselves (own, or administrators)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "{keys}"}}))},
                "post": {"summary": "A new key, shown once (own, or administrators)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"label": {"type": "string"}, "expires_in_days": {"type": "integer"}}}}}}, "responses": with(json!({"201": {"description": "the key"}}))}},
            "/v1/keys/{id}": {"delete": {"summary": "Revoke a key (its owner or administrators)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"204": {"description": "revoked"}}))}},
            "/v1/credentials": {"get": {"summary": "Tool credentials: scope, host, placement, name, how stored — never values (administrators)", "responses": with(json!({"200": {"description": "{credentials}"}}))}},
            "/v1/credentials/{scope}": {
                "put": {"summary": "Set a scope's credentials (tool:CATEGORY/TOOL or host:HOST): header, query or bearer; value (sealed with TOOLGRAPH_SECRET_KEY), from_env or from_file; bound to one host (administrators)", "parameters": [{"name": "scope", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["entries"], "properties": {"host": {"type": "string"}, "entries": {"type": "array", "maxItems": 10, "items": {"type": "object", "required": ["placement", "name"], "properties": {"placement": {"enum": ["header", "query", "bearer"]}, "name": {"type": "string"}, "value": {"type": "string", "writeOnly": true}, "from_env": {"type": "string"}, "from_file": {"type": "string"}}}}}}}}},
                    "responses": with(json!({"200": {"description": "stored (without values)"}}))},
                "delete": {"summary": "Delete a scope's credentials (administrators)", "parameters": [{"name": "scope", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"204": {"description": "deleted"}}))}},
            "/v1/audit": {"get": {"summary": "The audit log, newest first (administrators)", "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 1000}}], "responses": with(json!({"200": {"description": "{entries}"}}))}},
            "/v1/sessions": {"post": {"summary": "Start a conversation", "responses": with(json!({"201": {"description": "session_id"}}))},
                "get": {"summary": "The caller's conversations, most recently used first (turns kept, first request, last status)", "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}}], "responses": with(json!({"200": {"description": "{sessions}"}}))}},
            "/v1/sessions/{id}": {
                "get": {"summary": "A conversation's turns", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "turns"}}))},
                "delete": {"summary": "End a conversation", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"204": {"description": "deleted"}}))}},
            "/v1/tools/search": {"get": {"summary": "Search APIs (hybrid retrieval)", "parameters": [
                {"name": "q", "in": "query", "required": true, "schema": {"type": "string"}}, {"name": "k", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
                {"name": "category", "in": "query", "schema": {"type": "string"}}, {"name": "tool", "in": "query", "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "ranked APIs"}}))}},
            "/v1/tools": {"get": {"summary": "APIs, paged, by category and tool (ids or names), status and words; with category alone also its tools", "parameters": [
                    {"name": "category", "in": "query", "schema": {"type": "string"}}, {"name": "tool", "in": "query", "schema": {"type": "string"}}, {"name": "status", "in": "query", "schema": {"enum": ["active", "invalid"]}},
                    {"name": "q", "in": "query", "schema": {"type": "string"}}, {"name": "offset", "in": "query", "schema": {"type": "integer"}}, {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}}],
                    "responses": with(json!({"200": {"description": "{total, offset, limit, apis, tools?}"}}))},
                "post": {"summary": "Register an API: validated, URL checked, test-called, then added to graph and index (dry_run=true: only the test call and its response; nothing is written)",
                "parameters": [{"name": "dry_run", "in": "query", "schema": {"type": "boolean"}}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Registration"}}}},
                "responses": with(json!({"201": {"description": "admitted"}, "200": {"description": "dry run: the test call"}, "422": err("invalid, refused URL or failed test call")}))}},
            "/v1/tools/{id}": {
                "get": {"summary": "An API of the graph", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": with(json!({"200": {"description": "the API"}}))},
                "patch": {"summary": "Set an API's status (invalid: leaves search; memories using it are deleted) and/or whether its calls wait for approval (administrators)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "properties": {"status": {"enum": ["active", "invalid"]}, "reason": {"type": "string"}, "requires_approval": {"type": "boolean"}}}}}},
                    "responses": with(json!({"200": {"description": "updated"}}))}},
            "/v1/tools/import-openapi": {"post": {"summary": "Import an OpenAPI 3 document (JSON or YAML): every operation goes through registration",
                "parameters": [{"name": "category", "in": "query", "schema": {"type": "string"}}, {"name": "dry_run", "in": "query", "schema": {"type": "boolean"}, "description": "list the operations (nothing is called or written)"},
                    {"name": "only", "in": "query", "schema": {"type": "string"}, "description": "comma-separated operations (as a dry run lists them) to admit"}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}, "application/yaml": {"schema": {"type": "object"}}}},
                "responses": with(json!({"200": {"description": "admitted and skipped operations"}}))}},
            "/v1/graph/cypher": {"post": {"summary": "Read-only, parameterized Cypher (FalkorDB, Neo4j); row and time limits",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}, "params": {"type": "object"}}}}}},
                "responses": with(json!({"200": {"description": "columns and rows"}, "501": err("the embedded store has no Cypher")}))}}
        }
    }))
}
