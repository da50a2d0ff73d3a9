//! The daemon over real HTTP, in process: every endpoint and its errors, on ComplexFuncBench's
//! learned graph with the replay sandbox serving the real recorded responses, and on an empty
//! graph that gets tools registered (test-called against the sandbox) and imported from OpenAPI.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use toolgraph_engine::plan::deterministic::DeterministicPlanner;
use toolgraph_engine::run::RunSettings;
use toolgraph_eval::chains::{gold_of, learn, recordings};
use toolgraph_ingest::complexfuncbench::{read_chains, read_specs, Chain};
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::daemon::Stack;

use crate::daemon_common::*;

fn data() -> PathBuf {
    std::env::var_os("TOOLGRAPH_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"))
}

/// ComplexFuncBench's specs, the training chains and the 20 held-out ones (every 7th of the first 140).
pub(super) fn complexfuncbench_split() -> (Vec<toolgraph_ingest::complexfuncbench::Spec>, Vec<Chain>, Vec<Chain>) {
    let d = data().join("complexfuncbench");
    let specs = read_specs(&d.join("spec.json.gz"), 1 << 30).unwrap();
    let chains = read_chains(&d.join("data.json.gz"), 1 << 30).unwrap();
    let held_out = |i: usize| i % 7 == 3 && i < 140;
    let mut train = Vec::new();
    let mut test = Vec::new();
    for (i, c) in chains.into_iter().enumerate() {
        if held_out(i) {
            test.push(c)
        } else {
            train.push(c)
        }
    }
    (specs, train, test)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_orchestrates_streams_keeps_sessions_and_invalidates_tools() {
    let (specs, chains, test) = complexfuncbench_split();
    let train: Vec<&Chain> = chains.iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let emb = embedder();
    let mut s = settings();
    // A small body limit, so the oversized body below still fits the loopback socket buffers and
    // the client reads the 413 instead of racing the server's close.
    s.server.max_body_bytes = 64 * 1024;
    let learned = learn(dir.path(), &train, &specs, &s, emb.clone(), None).await.unwrap();
    let (recs, _) = recordings(&test, &specs);
    let sb = Sandbox::new(Library::new(recs), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
    let run = RunSettings { use_memory: false, learn: false, remember: false, ..RunSettings::default() };
    s.run = run;
    let backends: Stack = learned.stack(&s, exec_to(Some(sb_addr), true), Arc::new(DeterministicPlanner::default()));
    let (url, d, stop, server) = start(backends, ApiKeys::default()).await;
    let http = reqwest::Client::new();

    // Health, readiness, the API document.
    assert_eq!(http.get(format!("{url}/healthz")).send().await.unwrap().status(), 200);
    let ready: Value = http.get(format!("{url}/readyz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["status"], "ready");
    assert!(ready["apis"].as_u64().unwrap() > 10 && ready["indexed"].as_u64().unwrap() > 10, "{ready}");
    let doc: Value = http.get(format!("{url}/openapi.json")).send().await.unwrap().json().await.unwrap();
    for p in [
        "/v1/orchestrate",
        "/v1/models",
        "/v1/runs/{id}",
        "/v1/tools",
        "/v1/tools/search",
        "/v1/tools/import-openapi",
        "/v1/graph/cypher",
        "/readyz",
        "/metrics",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} documented");
    }

    // A held-out request: planned and executed, answer + trace.
    let gold = gold_of(&test[0]).unwrap();
    let r = http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": gold.request})).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let first: Value = r.json().await.unwrap();
    assert_eq!(first["status"], "answered", "{first}");
    let names: Vec<&str> = first["chain"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Search_Car_Location", "Search_Car_Rentals", "Search_Car_Rentals"]);
    assert!(first["trace"].as_array().unwrap().len() > 5);
    let (run_id, session_id) =
        (first["run_id"].as_str().unwrap().to_string(), first["session_id"].as_str().unwrap().to_string());
    let past: Value = http.get(format!("{url}/v1/runs/{run_id}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(past["status"], "answered");
    assert_eq!(past["request"], json!(gold.request));
    assert_eq!(past["trace"], first["trace"]);
    error_of(http.get(format!("{url}/v1/runs/run_nope")).send().await.unwrap(), 404, "not_found").await;

    // Streamed: the run's ids, then steps as they happen, then the result.
    let r = http
        .post(format!("{url}/v1/orchestrate"))
        .header("accept", "text/event-stream")
        .json(&json!({"request": gold.request, "session_id": session_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = sse_events(&r.text().await.unwrap());
    assert_eq!(events.first().map(|e| e.0.as_str()), Some("run"));
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("result"));
    let steps: Vec<&Value> = events.iter().filter(|e| e.0 == "step").map(|e| &e.1).collect();
    assert!(
        steps
            .iter()
            .any(|s| s["event"] == "call" || s.get("Call").is_some() || s.to_string().contains("Search_Car_Rentals")),
        "{steps:?}"
    );
    assert!(steps.len() >= 5);
    let streamed = &events.last().unwrap().1;
    assert_eq!(streamed["status"], "answered");
    assert_eq!(streamed["session_id"], json!(session_id));
    // ?stream=true works too.
    let r = http
        .post(format!("{url}/v1/orchestrate?stream=true"))
        .json(&json!({"request": gold.request, "session_id": session_id, "given": {"currency_code": "USD"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(sse_events(&r.text().await.unwrap()).last().unwrap().0, "result");

    // The session kept all three turns and the given value.
    let ses: Value = http.get(format!("{url}/v1/sessions/{session_id}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(ses["turns"].as_array().unwrap().len(), 3, "{ses}");
    assert_eq!(ses["given"]["currency_code"], "USD");
    error_of(
        http.post(format!("{url}/v1/orchestrate"))
            .json(&json!({"request": "x", "session_id": "ses_unknown"}))
            .send()
            .await
            .unwrap(),
        404,
        "not_found",
    )
    .await;
    // Per request: the mode and the planner; the configured models, never a key.
    let planned: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .json(&json!({"request": gold.request, "mode": "plan", "planner": "deterministic"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(planned["stats"]["planned"], json!(true), "{planned}");
    assert!(
        planned["stats"]["planner_calls"].as_u64().unwrap() < first["stats"]["planner_calls"].as_u64().unwrap(),
        "{planned}"
    );
    // Plan only: the same request planned with nothing sent; its data flow comes back as
    // references, and the run says it was a dry run.
    let served = sb.stats().served;
    let dry: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .json(&json!({"request": gold.request, "dry_run": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sb.stats().served, served, "a dry run sends nothing: {dry}");
    assert_eq!(
        (dry["stats"]["dry_run"].as_bool(), dry["stats"]["http_calls"].as_u64()),
        (Some(true), Some(0)),
        "{dry}"
    );
    assert!(!dry["chain"].as_array().unwrap().is_empty(), "{dry}");
    assert!(first["stats"].get("dry_run").is_none(), "an executed run does not say dry_run: {}", first["stats"]);
    let e = error_of(
        http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": "x", "mode": "fast"})).send().await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("`mode`"), "{e}");
    let e = error_of(
        http.post(format!("{url}/v1/orchestrate"))
            .json(&json!({"request": "x", "planner": "llm", "model": "gpt-9"}))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request",
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("configured: local"), "{e}");
    let models: Value = http.get(format!("{url}/v1/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(models["default"], "local", "{models}");
    assert_eq!(models["models"][0]["name"], "local");
    assert!(models["models"][0]["key_set"].is_boolean() && models["models"][0].get("api_key").is_none(), "{models}");
    let created: Value = http.post(format!("{url}/v1/sessions")).send().await.unwrap().json().await.unwrap();
    let sid = created["session_id"].as_str().unwrap();
    assert_eq!(http.delete(format!("{url}/v1/sessions/{sid}")).send().await.unwrap().status(), 204);
    error_of(http.get(format!("{url}/v1/sessions/{sid}")).send().await.unwrap(), 404, "not_found").await;

    // Tool search, with bounds.
    let found: Value = http
        .get(format!("{url}/v1/tools/search?q=car%20rental%20pick%20up&k=3"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert!(results.iter().any(|h| h["name"] == "Search_Car_Rentals"), "{found}");
    error_of(http.get(format!("{url}/v1/tools/search?q=car&k=0")).send().await.unwrap(), 400, "invalid_request").await;
    error_of(http.get(format!("{url}/v1/tools/search")).send().await.unwrap(), 400, "invalid_request").await;
    error_of(http.get(format!("{url}/v1/tools/search?q=car&k=abc")).send().await.unwrap(), 400, "invalid_request")
        .await;

    // Cypher is refused clearly on the embedded store.
    error_of(
        http.post(format!("{url}/v1/graph/cypher"))
            .json(&json!({"query": "MATCH (n) RETURN count(n)"}))
            .send()
            .await
            .unwrap(),
        501,
        "cypher_unsupported",
    )
    .await;

    // Invalidate the location API: it leaves search and the run no longer uses it.
    let loc_id = first["chain"][0]["api"].as_str().unwrap().to_string();
    let tool: Value = http.get(format!("{url}/v1/tools/{loc_id}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(tool["name"], "Search_Car_Location");
    let p: Value = http
        .patch(format!("{url}/v1/tools/{loc_id}"))
        .json(&json!({"status": "invalid"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(p["status"], "invalid", "{p}");
    assert!(p["memories_deleted"].as_u64().unwrap() > 0, "the learned memories that use it are deleted: {p}");
    let found: Value = http
        .get(format!("{url}/v1/tools/search?q=search%20car%20location&k=20"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(found["results"].as_array().unwrap().iter().all(|h| h["id"] != json!(loc_id)), "{found}");
    let again: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .json(&json!({"request": gold.request}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(again["chain"].as_array().unwrap().iter().all(|c| c["api"] != json!(loc_id)), "{again}");
    let p: Value = http
        .patch(format!("{url}/v1/tools/{loc_id}"))
        .json(&json!({"status": "active"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(p["status"], "active");
    error_of(
        http.patch(format!("{url}/v1/tools/{loc_id}")).json(&json!({"status": "gone"})).send().await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.patch(format!("{url}/v1/tools/a/b/c")).json(&json!({"status": "invalid"})).send().await.unwrap(),
        404,
        "not_found",
    )
    .await;

    // Bad input: every error in the one contract.
    error_of(http.post(format!("{url}/v1/orchestrate")).json(&json!({})).send().await.unwrap(), 400, "invalid_request")
        .await;
    error_of(
        http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": "hi", "extra": 1})).send().await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": "  "})).send().await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": "x".repeat(5000)})).send().await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/orchestrate"))
            .body("{")
            .header("content-type", "application/json")
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/orchestrate")).body("{}").send().await.unwrap(),
        415,
        "unsupported_media_type",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/orchestrate"))
            .header("content-type", "application/json")
            .body(vec![b' '; 100 * 1024])
            .send()
            .await
            .unwrap(),
        413,
        "body_too_large",
    )
    .await;
    error_of(http.get(format!("{url}/nope")).send().await.unwrap(), 404, "not_found").await;
    error_of(http.get(format!("{url}/v1/orchestrate")).send().await.unwrap(), 405, "method_not_allowed").await;

    // Metrics count what happened.
    let m = http.get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("toolgraph_runs_total{status=\"answered\"}"), "{m}");
    assert!(
        m.contains("toolgraph_http_requests_total{method=\"POST\",route=\"/v1/orchestrate\",status=\"200\"}"),
        "{m}"
    );
    assert!(m.contains("toolgraph_tool_calls_total"));

    stop_daemon(d, stop, server).await;
    let _ = sb_stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_admits_tools_by_test_call_and_enforces_keys_limits_and_ssrf() {
    let emb = embedder();
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backends = empty_stack(dir.path(), emb.clone(), exec_to(None, true), |_| {}).await;
    let (url, d, stop, server) = start(backends, ApiKeys::new(["test-key-1"])).await;
    let http = reqwest::Client::new();
    let key = "Bearer test-key-1";

    // Keys: missing, wrong, right (also as X-API-Key); health stays open.
    error_of(http.get(format!("{url}/v1/tools/search?q=weather")).send().await.unwrap(), 401, "missing_api_key").await;
    let e = error_of(
        http.get(format!("{url}/v1/tools/search?q=weather"))
            .header("authorization", "Bearer nope")
            .send()
            .await
            .unwrap(),
        401,
        "invalid_api_key",
    )
    .await;
    assert!(!e.to_string().contains("nope"), "keys are never echoed");
    assert_eq!(
        http.get(format!("{url}/v1/tools/search?q=weather"))
            .header("x-api-key", "test-key-1")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(http.get(format!("{url}/healthz")).send().await.unwrap().status(), 200);

    // Registration: validated, URL checked, test-called, admitted.
    let weather = json!({
        "name": "current_weather", "description": "Current weather conditions and temperature for a city",
        "tool": "Weather Example", "category": "Weather", "method": "GET",
        "url": format!("http://{sb_addr}/weather.example.com/current"),
        "parameters": [{"name": "city", "type": "string", "description": "City name", "required": true}],
        "example": {"city": "Paris"}
    });
    let r = http.post(format!("{url}/v1/tools")).header("authorization", key).json(&weather).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let admitted: Value = r.json().await.unwrap();
    let id = admitted["id"].as_str().unwrap().to_string();
    assert_eq!(id, "weather/weather_example/current_weather");
    assert!(admitted["output_fields"].as_array().unwrap().contains(&json!("data.temperature_c")), "{admitted}");
    let found: Value = http
        .get(format!("{url}/v1/tools/search?q=temperature%20in%20a%20city&k=5"))
        .header("authorization", key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(found["results"][0]["id"], json!(id), "{found}");
    let tool: Value = http
        .get(format!("{url}/v1/tools/{id}"))
        .header("authorization", key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tool["status"], "active");

    // And it is used: a request planned and executed through it.
    let ran: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .header("authorization", key)
        .json(&json!({"request": "What is the current weather in Paris?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ran["status"], "answered", "{ran}");
    assert_eq!(ran["chain"][0]["api"], json!(id));
    assert_eq!(ran["chain"][0]["sent"]["city"], "Paris");

    // Refused admissions: a failing test call, a missing example, invalid fields.
    let mut bad = weather.clone();
    bad["name"] = json!("weather_nowhere");
    bad["example"] = json!({"city": "Atlantis"});
    error_of(
        http.post(format!("{url}/v1/tools")).header("authorization", key).json(&bad).send().await.unwrap(),
        422,
        "test_call_failed",
    )
    .await;
    bad["example"] = Value::Null;
    error_of(
        http.post(format!("{url}/v1/tools")).header("authorization", key).json(&bad).send().await.unwrap(),
        422,
        "example_required",
    )
    .await;
    bad["method"] = json!("TRACE");
    error_of(
        http.post(format!("{url}/v1/tools")).header("authorization", key).json(&bad).send().await.unwrap(),
        422,
        "invalid_tool",
    )
    .await;
    // SSRF: the metadata address and (here) any non-allow-listed private address.
    let mut meta = weather.clone();
    meta["url"] = json!("http://169.254.169.254/latest/meta-data");
    let e = error_of(
        http.post(format!("{url}/v1/tools")).header("authorization", key).json(&meta).send().await.unwrap(),
        422,
        "url_refused",
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("link-local"), "{e}");
    meta["url"] = json!("http://10.0.0.7/x");
    error_of(
        http.post(format!("{url}/v1/tools")).header("authorization", key).json(&meta).send().await.unwrap(),
        422,
        "url_refused",
    )
    .await;

    // OpenAPI import: admitted operations and skipped ones, with why.
    let doc = json!({
        "openapi": "3.0.3", "info": {"title": "Weather Example", "description": "Forecasts"},
        "servers": [{"url": format!("http://{sb_addr}/weather.example.com")}],
        "paths": {
            "/forecast": {"get": {"operationId": "forecast", "summary": "Daily forecast highs for a city",
                "parameters": [{"name": "city", "in": "query", "required": true, "schema": {"type": "string"}, "example": "Oslo"},
                               {"name": "days", "in": "query", "schema": {"type": "integer", "example": 2}}]}},
            "/alerts": {"get": {"operationId": "alerts", "parameters": [{"name": "region", "in": "query", "required": true, "schema": {"type": "string"}}]}}
        }
    });
    let imported: Value = http
        .post(format!("{url}/v1/tools/import-openapi?category=Weather"))
        .header("authorization", key)
        .json(&doc)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(imported["admitted"].as_array().unwrap().len(), 1, "{imported}");
    assert_eq!(imported["admitted"][0]["id"], "weather/weather_example/forecast");
    assert_eq!(imported["skipped"][0]["code"], "example_required", "{imported}");
    error_of(
        http.post(format!("{url}/v1/tools/import-openapi"))
            .header("authorization", key)
            .json(&json!({"swagger": "2.0"}))
            .send()
            .await
            .unwrap(),
        422,
        "invalid_openapi",
    )
    .await;
    // The same document as YAML.
    let yaml = serde_norway::to_string(&doc).unwrap();
    let again: Value = http
        .post(format!("{url}/v1/tools/import-openapi?category=Weather"))
        .header("authorization", key)
        .header("content-type", "application/yaml")
        .body(yaml)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["admitted"][0]["id"], "weather/weather_example/forecast", "{again}");
    error_of(
        http.post(format!("{url}/v1/tools/import-openapi"))
            .header("authorization", key)
            .header("content-type", "application/yaml")
            .body("paths: [unclosed")
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/tools/import-openapi"))
            .header("authorization", key)
            .header("content-type", "text/plain")
            .body("x")
            .send()
            .await
            .unwrap(),
        415,
        "unsupported_media_type",
    )
    .await;

    // A conversation: the second turn names no city; the session's first turn found one.
    let t1: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .header("authorization", key)
        .json(&json!({"request": "What is the current weather in Paris?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t1["status"], "answered", "{t1}");
    let t2: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .header("authorization", key)
        .json(&json!({"request": "and the daily forecast highs for the next 2 days there?", "session_id": t1["session_id"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t2["status"], "answered", "{t2}");
    assert_eq!(t2["chain"][0]["api"], "weather/weather_example/forecast", "{t2}");
    assert_eq!(t2["chain"][0]["sent"]["city"], "Paris", "the city comes from the earlier turn: {t2}");
    // Without the session the same request has no city to give.
    let alone: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .header("authorization", key)
        .json(&json!({"request": "and the daily forecast highs for the next 2 days there?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(alone["status"], "answered", "{alone}");

    // Invalidating removes it from search.
    http.patch(format!("{url}/v1/tools/{id}"))
        .header("authorization", key)
        .json(&json!({"status": "invalid"}))
        .send()
        .await
        .unwrap();
    let found: Value = http
        .get(format!("{url}/v1/tools/search?q=current%20weather&k=5"))
        .header("authorization", key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(found["results"].as_array().unwrap().iter().all(|h| h["id"] != json!(id)), "{found}");
    stop_daemon(d, stop, server).await;

    // A daemon that does not allow-list loopback refuses to register a tool on 127.0.0.1.
    let dir2 = tempfile::tempdir().unwrap();
    let strict = empty_stack(dir2.path(), emb.clone(), exec_to(None, false), |s| {
        // One token per 10 s: a slow machine cannot refill the bucket within this test.
        s.server.rate_per_s = 0.1;
        s.server.rate_burst = 2.0;
    })
    .await;
    let (url, _d, stop, server) = start(strict, ApiKeys::default()).await;
    let e =
        error_of(http.post(format!("{url}/v1/tools")).json(&weather).send().await.unwrap(), 422, "url_refused").await;
    assert!(e["message"].as_str().unwrap().contains("loopback"), "{e}");
    // Rate limit: the burst of 2 is spent (the registration and this search), the next request
    // is refused with Retry-After.
    assert_eq!(http.get(format!("{url}/v1/tools/search?q=x")).send().await.unwrap().status(), 200);
    let r = http.get(format!("{url}/v1/tools/search?q=x")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_some());
    error_of(r, 429, "rate_limited").await;
    let _ = stop.send(());
    server.await.unwrap().unwrap();

    // Bounded in-flight runs (503 + Retry-After when full) and a graceful shutdown that lets the
    // in-flight run finish.
    let slow = Sandbox::new(Library::new(weather_recordings()), Faults { latency_ms: 1500, ..Faults::default() });
    let (slow_addr, slow_stop) = sandbox::spawn("127.0.0.1:0", slow).await.unwrap();
    let dir3 = tempfile::tempdir().unwrap();
    let one = empty_stack(dir3.path(), emb.clone(), exec_to(None, true), |s| s.server.max_in_flight = 1).await;
    let (url, d, stop, server) = start(one, ApiKeys::default()).await;
    let mut w = weather.clone();
    w["url"] = json!(format!("http://{slow_addr}/weather.example.com/current"));
    assert_eq!(http.post(format!("{url}/v1/tools")).json(&w).send().await.unwrap().status(), 201);
    let u = url.clone();
    let first = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{u}/v1/orchestrate"))
            .json(&json!({"request": "current weather in Paris"}))
            .send()
            .await
            .unwrap()
    });
    for _ in 0..1000 {
        if d.runs_in_flight() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(d.runs_in_flight(), 1, "the first run is executing (its tool call takes 1.5 s)");
    let r = http
        .post(format!("{url}/v1/orchestrate"))
        .json(&json!({"request": "current weather in Paris"}))
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("retry-after").is_some());
    error_of(r, 503, "busy").await;
    let _ = stop.send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        http.get(format!("{url}/readyz")).send().await.map(|r| r.status().as_u16()).unwrap_or(503),
        503,
        "draining: not ready"
    );
    let finished = first.await.unwrap();
    assert_eq!(finished.status(), 200, "the in-flight run finished during shutdown");
    let body: Value = finished.json().await.unwrap();
    assert_eq!(body["status"], "answered", "{body}");
    server.await.unwrap().unwrap();
    assert!(http.get(format!("{url}/healthz")).send().await.is_err(), "stopped");
    let _ = (sb_stop.send(()), slow_stop.send(()));
}
