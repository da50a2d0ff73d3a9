//! OpenTelemetry: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, a run and each of its tool calls are
//! exported as spans over OTLP/HTTP to a collector (here a real HTTP endpoint on 127.0.0.1 that
//! keeps what it receives); the spans carry the run id and the API.

use axum::body::Bytes;
use axum::routing::post;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_server::daemon::limits::ApiKeys;

#[path = "common/daemon.rs"]
mod daemon_common;
use daemon_common::*;

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_and_tool_calls_are_exported_as_spans_over_otlp() {
    // The collector: OTLP/HTTP's trace endpoint, recording each export's body.
    let received: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let r = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let r = r.clone();
            async move {
                r.lock().unwrap().push(body.to_vec());
                ([(axum::http::header::CONTENT_TYPE, "application/x-protobuf")], Vec::<u8>::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"));
    std::env::set_var("OTEL_BSP_SCHEDULE_DELAY", "100");
    let mut telemetry = toolgraph_server::telemetry::init("info", std::io::sink);
    assert!(telemetry.exporting());

    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (url, d, stop, server) =
        start(empty_stack(dir.path(), embedder(), exec_to(None, true), |_| {}).await, ApiKeys::default()).await;
    let http = reqwest::Client::new();
    assert_eq!(
        http.post(format!("{url}/v1/tools"))
            .json(&weather_tool(&format!("http://{sb_addr}")))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    let ran: Value = http
        .post(format!("{url}/v1/orchestrate"))
        .json(&json!({"request": "What is the current weather in Paris?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ran["status"], "answered", "{ran}");
    let run_id = ran["run_id"].as_str().unwrap().to_string();
    stop_daemon(d, stop, server).await;
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await.unwrap();

    let bodies = received.lock().unwrap().clone();
    assert!(!bodies.is_empty(), "the collector received no export");
    let all: Vec<u8> = bodies.concat();
    for want in ["toolgraph", "run", "tool_call", run_id.as_str(), "weather/weather_example/current_weather"] {
        assert!(contains(&all, want), "no `{want}` in the exported spans");
    }
    let _ = sb_stop.send(());
}
