//! The daemon admitting tools: registration by test call, OpenAPI import (JSON and YAML), keys,
//! SSRF guards, sessions that carry a value between turns, rate limits and bounded in-flight runs
//! with a graceful shutdown.

use crate::daemon_common::*;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_server::daemon::limits::ApiKeys;

/// Keys: missing, wrong, right (also as X-API-Key); health stays open.
async fn keys_are_checked_and_health_stays_open(http: &reqwest::Client, url: &str) {
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
}

/// Refused admissions: a failing test call, a missing example, invalid fields; SSRF: the metadata
/// address and (here) any non-allow-listed private address.
async fn refused_admissions_and_ssrf(http: &reqwest::Client, url: &str, key: &str, weather: &Value) {
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
}

/// A conversation: the second turn names no city; the session's first turn found one. Without
/// the session the same request has no city to give.
async fn a_second_turn_takes_the_city_from_the_first(http: &reqwest::Client, url: &str, key: &str) {
    let t1: Value =
        orchestrate(http, url, Some(key), &json!({"request": "What is the current weather in Paris?"})).await;
    assert_eq!(t1["status"], "answered", "{t1}");
    let t2: Value = orchestrate(
        http,
        url,
        Some(key),
        &json!({"request": "and the daily forecast highs for the next 2 days there?", "session_id": t1["session_id"]}),
    )
    .await;
    assert_eq!(t2["status"], "answered", "{t2}");
    assert_eq!(t2["chain"][0]["api"], "weather/weather_example/forecast", "{t2}");
    assert_eq!(t2["chain"][0]["sent"]["city"], "Paris", "the city comes from the earlier turn: {t2}");
    // Without the session the same request has no city to give.
    let alone: Value = orchestrate(
        http,
        url,
        Some(key),
        &json!({"request": "and the daily forecast highs for the next 2 days there?"}),
    )
    .await;
    assert_ne!(alone["status"], "answered", "{alone}");
}

/// OpenAPI import: admitted operations and skipped ones, with why; the same document as YAML.
async fn openapi_import_admits_and_skips(http: &reqwest::Client, url: &str, key: &str, sb_addr: std::net::SocketAddr) {
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
}

/// A daemon that does not allow-list loopback refuses to register a tool on 127.0.0.1, and its
/// rate limit answers 429 with Retry-After.
async fn a_strict_daemon_refuses_loopback_and_limits_the_rate(
    http: &reqwest::Client,
    emb: &Arc<dyn toolgraph_engine::embed::Embedder>,
    weather: &Value,
) {
    let dir2 = tempfile::tempdir().unwrap();
    let strict = empty_stack(dir2.path(), emb.clone(), exec_to(None, false), |s| {
        // One token per 10 s: a slow machine cannot refill the bucket within this test.
        s.server.rate_per_s = 0.1;
        s.server.rate_burst = 2.0;
    })
    .await;
    let (url, _d, stop, server) = start(strict, ApiKeys::default()).await;
    let e =
        error_of(http.post(format!("{url}/v1/tools")).json(weather).send().await.unwrap(), 422, "url_refused").await;
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
}

/// Bounded in-flight runs (503 + Retry-After when full) and a graceful shutdown that lets the
/// in-flight run finish.
async fn in_flight_runs_are_bounded_and_shutdown_lets_them_finish(
    http: &reqwest::Client,
    emb: &Arc<dyn toolgraph_engine::embed::Embedder>,
    weather: &Value,
) {
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
        crate::common::http_client(crate::common::REQUEST_LIMIT)
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
    let _ = slow_stop.send(());
}

/// Third hardening, Low: random keys were checked as fast as they came (3,000 at 812/s, each a
/// store lookup). Past ten invalid keys in a row from one address, the next waits (429 with
/// Retry-After) before any key from it is looked up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_api_keys_is_slowed() {
    let dir = tempfile::tempdir().unwrap();
    let backends = empty_stack(dir.path(), embedder(), exec_to(None, true), |s| s.server.rate_burst = 1000.0).await;
    let (url, _d, stop, server) = start(backends, ApiKeys::new(["the-right-key"])).await;
    let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
    let get = |key: String| http.get(format!("{url}/v1/me")).header("authorization", format!("Bearer {key}")).send();
    assert_eq!(get("the-right-key".into()).await.unwrap().status(), 200);
    for i in 0..10 {
        error_of(get(format!("guess-{i}")).await.unwrap(), 401, "invalid_api_key").await;
    }
    error_of(get("guess-10".into()).await.unwrap(), 401, "invalid_api_key").await;
    let r = get("guess-11".into()).await.unwrap();
    assert!(r.headers().get("retry-after").is_some(), "{r:?}");
    error_of(r, 429, "rate_limited").await;
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_admits_tools_by_test_call_and_enforces_keys_limits_and_ssrf() {
    let emb = embedder();
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backends = empty_stack(dir.path(), emb.clone(), exec_to(None, true), |_| {}).await;
    let (url, d, stop, server) = start(backends, ApiKeys::new(["test-key-1"])).await;
    let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
    let key = "Bearer test-key-1";

    keys_are_checked_and_health_stays_open(&http, &url).await;

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
    let ran: Value =
        orchestrate(&http, &url, Some(key), &json!({"request": "What is the current weather in Paris?"})).await;
    assert_eq!(ran["status"], "answered", "{ran}");
    assert_eq!(ran["chain"][0]["api"], json!(id));
    assert_eq!(ran["chain"][0]["sent"]["city"], "Paris");

    refused_admissions_and_ssrf(&http, &url, key, &weather).await;

    openapi_import_admits_and_skips(&http, &url, key, sb_addr).await;

    a_second_turn_takes_the_city_from_the_first(&http, &url, key).await;

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

    a_strict_daemon_refuses_loopback_and_limits_the_rate(&http, &emb, &weather).await;

    in_flight_runs_are_bounded_and_shutdown_lets_them_finish(&http, &emb, &weather).await;
    let _ = sb_stop.send(());
}
