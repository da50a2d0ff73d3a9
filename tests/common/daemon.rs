//! Helpers for the daemon's in-process tests: settings, the embedder, executors aimed at a replay
//! sandbox, an empty graph, a daemon on a free port, the error contract, SSE parsing.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::{ExecSettings, Executor};
use toolgraph_engine::run::RunSettings;
use toolgraph_sandbox::Recording;
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::daemon::{Daemon, Stack};

pub fn settings() -> toolgraph_schema::Settings {
    let mut s = toolgraph_engine::settings::load(None, &[]).expect("defaults load");
    s.embed.cache = String::new();
    s
}

pub fn embedder() -> Arc<dyn Embedder> {
    Arc::new(
        toolgraph_engine::adapters::fastembed::FastEmbedder::load(&settings().embed)
            .expect("model files: run scripts/setup.sh"),
    )
}

pub fn exec_to(sandbox: Option<std::net::SocketAddr>, allow_loopback: bool) -> Executor {
    Executor::new(ExecSettings {
        rewrites: sandbox.map(|a| vec![("https://".to_string(), format!("http://{a}/"))]).unwrap_or_default(),
        allow_private: if allow_loopback { vec!["127.0.0.1/32".into()] } else { vec![] },
        timeout_ms: 2_000,
        retries: 1,
        backoff_ms: 10,
        ..ExecSettings::default()
    })
    .unwrap()
}

/// A daemon on 127.0.0.1:PORT with a throw-away state store; dropping the sender shuts it down.
pub async fn start(
    stack: Stack,
    keys: ApiKeys,
) -> (String, Arc<Daemon>, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<std::io::Result<()>>) {
    start_on(stack, None, keys).await
}

/// [`start`] on the state store `state` (`None`: a throw-away in-memory one).
pub async fn start_on(
    stack: Stack,
    state: Option<Arc<toolgraph_server::state::StateStore>>,
    keys: ApiKeys,
) -> (String, Arc<Daemon>, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<std::io::Result<()>>) {
    let d = Daemon::new(stack, state, keys).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(toolgraph_server::daemon::serve(listener, d.clone(), async move {
        let _ = rx.await;
    }));
    (url, d, tx, h)
}

/// Stop a daemon started by [`start`] and wait until nothing of it runs on: `serve` has returned
/// and no task holds the daemon (so its embedded stores are closed and can be opened again, and
/// its folder removed). A task that outlives the shutdown fails the test.
pub async fn stop_daemon(
    d: Arc<Daemon>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    for _ in 0..500 {
        if Arc::strong_count(&d) == 1 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{} references to the daemon outlive its shutdown by 5 s", Arc::strong_count(&d) - 1);
}

/// `POST /v1/orchestrate` with `body` (and the bearer `key`, if any): the answer's JSON, whatever
/// its status.
pub async fn orchestrate(http: &reqwest::Client, url: &str, key: Option<&str>, body: &Value) -> Value {
    let mut r = http.post(format!("{url}/v1/orchestrate")).json(body);
    if let Some(k) = key {
        r = r.header("authorization", k);
    }
    r.send().await.unwrap().json().await.unwrap()
}

/// Every error body follows the contract; returns it.
pub async fn error_of(r: reqwest::Response, status: u16, code: &str) -> Value {
    assert_eq!(r.status().as_u16(), status);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["code"], json!(code), "{b}");
    assert!(b["message"].as_str().is_some_and(|m| !m.is_empty()) && b["type"].is_string(), "{b}");
    b
}

/// Server-Sent Events of a body: (event, data) in order.
pub fn sse_events(text: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut ev = String::from("message");
        let mut data = String::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event:") {
                ev = e.trim().to_string();
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            }
        }
        if !data.is_empty() {
            out.push((ev, serde_json::from_str(&data).unwrap_or(Value::String(data))));
        }
    }
    out
}

/// Recordings of a small weather API on the sandbox (route `weather.example.com/...`).
pub fn weather_recordings() -> Vec<Recording> {
    vec![
        Recording {
            api: "current".into(),
            route: "weather.example.com/current".into(),
            required: vec!["city".into()],
            arguments: serde_json::from_value(json!({"city": "Paris"})).unwrap(),
            response: json!({"status": true, "data": {"city": "Paris", "temperature_c": 12.5, "condition": "light rain"}}),
        },
        Recording {
            api: "forecast".into(),
            route: "weather.example.com/forecast".into(),
            required: vec!["city".into()],
            arguments: serde_json::from_value(json!({"city": "Oslo", "days": 2})).unwrap(),
            response: json!({"status": true, "data": {"days": [{"day": 1, "high_c": 3}, {"day": 2, "high_c": 5}]}}),
        },
        Recording {
            api: "forecast".into(),
            route: "weather.example.com/forecast".into(),
            required: vec!["city".into()],
            arguments: serde_json::from_value(json!({"city": "Paris", "days": 2})).unwrap(),
            response: json!({"status": true, "data": {"days": [{"day": 1, "high_c": 14}, {"day": 2, "high_c": 16}]}}),
        },
    ]
}

/// A stack over an empty graph under `dir` (learning off unless `tweak` turns it on).
pub async fn empty_stack(
    dir: &std::path::Path,
    emb: Arc<dyn Embedder>,
    executor: Executor,
    tweak: impl FnOnce(&mut toolgraph_schema::Settings),
) -> Stack {
    let mut s = settings();
    s.run = RunSettings { learn: false, ..RunSettings::default() };
    tweak(&mut s);
    let store: Arc<dyn toolgraph_engine::GraphStore> =
        Arc::new(toolgraph_engine::adapters::embedded::EmbeddedStore::open(&dir.join("graph.redb")).unwrap());
    store.setup().await.unwrap();
    let vectors = toolgraph_engine::store::open_vectors(&toolgraph_schema::VectorSettings {
        uri: format!("embedded:{}", dir.join("vectors").display()),
        ..s.vectors.clone()
    })
    .unwrap();
    toolgraph_engine::retrieval::index::index_graph(
        store.as_ref(),
        vectors.as_ref(),
        emb.as_ref(),
        None,
        64,
        false,
        |_, _| {},
    )
    .await
    .unwrap();
    Stack::over(s, store, vectors, emb, executor).await.unwrap()
}

/// The weather API of `weather_recordings` as a registration (`POST /v1/tools`) at `base`.
pub fn weather_tool(base: &str) -> Value {
    json!({
        "name": "current_weather", "description": "Current weather conditions and temperature for a city",
        "tool": "Weather Example", "category": "Weather", "method": "GET",
        "url": format!("{base}/weather.example.com/current"),
        "parameters": [{"name": "city", "type": "string", "description": "City name", "required": true}],
        "example": {"city": "Paris"}
    })
}
