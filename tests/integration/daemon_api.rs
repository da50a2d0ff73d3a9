//! The daemon over real HTTP, in process: every endpoint and its errors, on ComplexFuncBench's
//! learned graph with the replay sandbox serving the real recorded responses, and on an empty
//! graph that gets tools registered (test-called against the sandbox) and imported from OpenAPI.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use toolgraph_engine::plan::DeterministicPlanner;
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

/// Invalidate the location API: it leaves search and the run no longer uses it; active again after.
async fn an_invalid_api_leaves_search_and_runs(http: &reqwest::Client, url: &str, loc_id: &str, request: &str) {
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
    let again: Value = orchestrate(http, url, None, &json!({"request": request})).await;
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
}

/// A bad mode or model is refused by name; the configured models are listed, never a key; a
/// session is made and deleted.
async fn options_are_checked_models_listed_and_sessions_made(http: &reqwest::Client, url: &str) {
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
}

/// Plan only: the same request planned with nothing sent; its data flow comes back as
/// references, and the run says it was a dry run.
async fn a_dry_run_sends_nothing(http: &reqwest::Client, url: &str, sb: &Sandbox, request: &str, first: &Value) {
    let served = sb.stats().served;
    let dry: Value = orchestrate(http, url, None, &json!({"request": request, "dry_run": true})).await;
    assert_eq!(sb.stats().served, served, "a dry run sends nothing: {dry}");
    assert_eq!(
        (dry["stats"]["dry_run"].as_bool(), dry["stats"]["http_calls"].as_u64()),
        (Some(true), Some(0)),
        "{dry}"
    );
    assert!(!dry["chain"].as_array().unwrap().is_empty(), "{dry}");
    assert!(first["stats"].get("dry_run").is_none(), "an executed run does not say dry_run: {}", first["stats"]);
}

/// Metrics count what happened.
async fn metrics_count_what_happened(http: &reqwest::Client, url: &str) {
    let m = http.get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("toolgraph_runs_total{status=\"answered\"}"), "{m}");
    assert!(
        m.contains("toolgraph_http_requests_total{method=\"POST\",route=\"/v1/orchestrate\",status=\"200\"}"),
        "{m}"
    );
    assert!(m.contains("toolgraph_tool_calls_total"));
}

/// Health, readiness, the API document.
async fn health_readiness_and_the_document(http: &reqwest::Client, url: &str) {
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
}

/// Tool search, with bounds; Cypher is refused clearly on the embedded store.
async fn tool_search_is_bounded_and_cypher_refused(http: &reqwest::Client, url: &str) {
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
}

/// Bad input: every error in the one contract.
async fn bad_input_answers_in_the_contract(http: &reqwest::Client, url: &str) {
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
    let http = crate::common::http_client(crate::common::REQUEST_LIMIT);

    health_readiness_and_the_document(&http, &url).await;

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
    let planned: Value =
        orchestrate(&http, &url, None, &json!({"request": gold.request, "mode": "plan", "planner": "deterministic"}))
            .await;
    assert_eq!(planned["stats"]["planned"], json!(true), "{planned}");
    assert!(
        planned["stats"]["planner_calls"].as_u64().unwrap() < first["stats"]["planner_calls"].as_u64().unwrap(),
        "{planned}"
    );
    a_dry_run_sends_nothing(&http, &url, &sb, &gold.request, &first).await;
    options_are_checked_models_listed_and_sessions_made(&http, &url).await;

    tool_search_is_bounded_and_cypher_refused(&http, &url).await;

    let loc_id = first["chain"][0]["api"].as_str().unwrap().to_string();
    an_invalid_api_leaves_search_and_runs(&http, &url, &loc_id, &gold.request).await;

    bad_input_answers_in_the_contract(&http, &url).await;

    metrics_count_what_happened(&http, &url).await;

    stop_daemon(d, stop, server).await;
    let _ = sb_stop.send(());
}
