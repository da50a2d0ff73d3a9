//! The daemon (`toolgraph serve`): orchestration over HTTP, streamed as Server-Sent Events on
//! request, conversational sessions, past runs, tool search / registration / invalidation /
//! OpenAPI import, read-only Cypher, health, readiness, Prometheus metrics and its own OpenAPI
//! document.
//!
//! Limits: API keys (digests only) and per-key token buckets on `/v1/*`; body size, request text
//! length and a time limit on every request; at most `server.max_in_flight` runs at once (503 +
//! Retry-After beyond); graceful shutdown stops accepting, answers `/readyz` with 503 and lets
//! in-flight runs finish within `server.shutdown_grace_s`. Tool responses are data: they reach
//! the planner only as observations and argument values, never as instructions, and the trace
//! never holds a key (keys are not part of runs at all).

pub mod error;
pub mod limits;
pub mod metrics;
mod openapi;
mod tools;

use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use error::{ApiError, ApiJson};
use limits::{ApiKeys, RateLimiter};
use metrics::Metrics;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::Executor;
use toolgraph_engine::graph::GraphStore;
use toolgraph_engine::plan::models::Models;
use toolgraph_engine::plan::{Earlier, Planner};
use toolgraph_engine::retrieval::cache::EmbeddingCache;
use toolgraph_engine::retrieval::hybrid::Retriever;
use toolgraph_engine::run::health::Health;
use toolgraph_engine::run::memory::Memory;
use toolgraph_engine::run::trace::TraceEvent;
use toolgraph_engine::run::{Engine, EngineParts, RunReport, RunSettings};
use toolgraph_engine::vector::VectorStore;
use toolgraph_schema::Settings;

/// What the daemon runs on: the stores, the embedder, the planner and the settings.
pub struct Backends {
    pub store: Arc<dyn GraphStore>,
    pub vectors: Arc<dyn VectorStore>,
    pub embedder: Arc<dyn Embedder>,
    pub memory: Arc<Memory>,
    pub executor: Executor,
    pub planner: Arc<dyn Planner>,
    pub run: RunSettings,
    pub settings: Settings,
    pub cache: Option<EmbeddingCache>,
    /// The planners requests may pick (`planner`, `model`); built from `settings.llm` when `None`.
    pub models: Option<Arc<Models>>,
}

/// A conversation: earlier turns' outputs and the values the user gave carry into the next run.
struct Session {
    turns: Vec<Value>,
    earlier: Vec<Earlier>,
    given: Map<String, Value>,
    last_used: Instant,
}

/// Bounded maps, oldest dropped first.
struct Bounded<T> {
    order: VecDeque<String>,
    map: HashMap<String, T>,
    cap: usize,
}

impl<T> Bounded<T> {
    fn new(cap: usize) -> Self {
        Bounded { order: VecDeque::new(), map: HashMap::new(), cap: cap.max(1) }
    }
    fn insert(&mut self, id: String, v: T) {
        if self.map.insert(id.clone(), v).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

/// The daemon's shared state.
pub struct Daemon {
    backends: Backends,
    queries: Arc<dyn Embedder>,
    engine: RwLock<Arc<Engine>>,
    /// Serializes registrations, invalidations and imports (each re-indexes and reloads).
    admin: tokio::sync::Mutex<()>,
    runs: Mutex<Bounded<Arc<Value>>>,
    sessions: Mutex<Bounded<Session>>,
    keys: ApiKeys,
    limiter: RateLimiter,
    in_flight: Arc<Semaphore>,
    pub metrics: Metrics,
    draining: AtomicBool,
    ids: AtomicU64,
    id_seed: u64,
    started: Instant,
    /// When the graph store last answered (ms since `started`; 0: never checked).
    graph_ok_at_ms: AtomicU64,
    /// API health across runs (and engine rebuilds).
    pub health: Arc<Health>,
    /// Runs were learned since the engine's graph was last loaded.
    learned_since_refresh: AtomicBool,
    /// Planners and models a request may choose.
    pub models: Arc<Models>,
}

/// How long a graph store that answered is taken as reachable without asking again.
const GRAPH_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Request texts whose embeddings are kept (a repeated request skips the model).
const QUERY_CACHE: usize = 10_000;

/// Build an engine over the graph and API index as they are now; `queries` embeds requests.
async fn build_engine(b: &Backends, queries: &Arc<dyn Embedder>, health: &Arc<Health>) -> toolgraph_engine::Result<Engine> {
    let snapshot = Arc::new(b.store.snapshot().await?);
    let retriever = Arc::new(Retriever::load(b.vectors.clone(), queries.clone(), None, b.settings.retrieval.clone()).await?);
    Ok(Engine::new(EngineParts {
        graph: snapshot,
        store: Some(b.store.clone()),
        retriever,
        memory: Some(b.memory.clone()),
        executor: b.executor.clone(),
        planner: b.planner.clone(),
        settings: b.run.clone(),
        weights: b.settings.weights,
        health: Some(health.clone()),
    }))
}

impl Daemon {
    pub async fn new(backends: Backends, keys: ApiKeys) -> toolgraph_engine::Result<Arc<Self>> {
        let queries: Arc<dyn Embedder> = Arc::new(toolgraph_engine::embed::Memoized::new(backends.embedder.clone(), QUERY_CACHE));
        let health = Arc::new(Health::new(backends.settings.health.clone(), &backends.store.node_snapshot().await?));
        let engine = build_engine(&backends, &queries, &health).await?;
        let models = match &backends.models {
            Some(m) => m.clone(),
            None => {
                let categories: Vec<String> = engine.graph().categories.values().map(|c| c.name.clone()).collect();
                Arc::new(Models::from_config(&backends.settings.llm, &categories)?)
            }
        };
        let s = &backends.settings.server;
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish();
        Ok(Arc::new(Daemon {
            engine: RwLock::new(Arc::new(engine)),
            queries,
            admin: tokio::sync::Mutex::new(()),
            runs: Mutex::new(Bounded::new(s.runs_kept)),
            sessions: Mutex::new(Bounded::new(s.sessions_kept)),
            limiter: RateLimiter::new(s.rate_per_s, s.rate_burst),
            in_flight: Arc::new(Semaphore::new(s.max_in_flight.max(1))),
            keys,
            metrics: Metrics::default(),
            draining: AtomicBool::new(false),
            ids: AtomicU64::new(0),
            id_seed: seed,
            started: Instant::now(),
            graph_ok_at_ms: AtomicU64::new(0),
            health,
            learned_since_refresh: AtomicBool::new(false),
            models,
            backends,
        }))
    }

    pub fn settings(&self) -> &Settings {
        &self.backends.settings
    }

    fn engine(&self) -> Arc<Engine> {
        self.engine.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Re-index changed APIs and reload the engine (after a registration or status change).
    async fn reload(&self) -> toolgraph_engine::Result<()> {
        let b = &self.backends;
        toolgraph_engine::retrieval::index::index_graph(b.store.as_ref(), b.vectors.as_ref(), b.embedder.as_ref(), b.cache.as_ref(), b.settings.retrieval.index_chunk, false, |_, _| {}).await?;
        let engine = build_engine(b, &self.queries, &self.health).await?;
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(engine);
        Ok(())
    }

    /// Load the graph again (counts, weights and statuses learned from runs since), keeping the
    /// rest of the engine; only when something was learned.
    pub async fn refresh_graph(&self) -> toolgraph_engine::Result<bool> {
        if !self.learned_since_refresh.swap(false, Ordering::SeqCst) {
            return Ok(false);
        }
        let snapshot = Arc::new(self.backends.store.snapshot().await?);
        let engine = self.engine().rebuilt(snapshot);
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(engine);
        Ok(true)
    }

    /// Probe every degraded API once with its recorded call: a success makes it active again, too
    /// many failures in a row `invalid` (its memories deleted). Returns the changes made.
    pub async fn probe_degraded(&self) -> toolgraph_engine::Result<Vec<toolgraph_schema::StatusChange>> {
        let ids = self.health.degraded();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let snap = self.backends.store.node_snapshot().await?;
        let mut changes = Vec::new();
        for id in ids {
            let Some(node) = snap.apis.get(&id) else { continue };
            let args: Map<String, Value> = match serde_json::from_str(&node.probe) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            let spec = toolgraph_engine::exec::CallSpec::from_node(node);
            let outcome = self.backends.executor.call(&spec, &args, &std::collections::HashMap::<String, Value>::new()).await;
            let verdict = match outcome {
                Ok(o) => match toolgraph_engine::exec::response_problem(&o.response) {
                    None => Ok(format!("HTTP {} in {:.0} ms", o.status, o.elapsed_ms)),
                    Some(p) => Err(p),
                },
                Err(e) => Err(e.to_string()),
            };
            let change = match verdict {
                Ok(detail) => Some(self.health.probe_succeeded(&id, &detail)),
                Err(detail) => self.health.probe_failed(&id, &detail),
            };
            if let Some(c) = change {
                self.backends.store.set_api_status(&c).await?;
                tracing::warn!(api = %c.id, status = %c.status, reason = %c.reason, "API status changed");
                if c.status == toolgraph_schema::STATUS_INVALID {
                    let n = self.backends.memory.forget_api(&c.id).await?;
                    tracing::warn!(api = %c.id, memories_deleted = n, "invalid API's memories deleted");
                }
                changes.push(c);
            }
        }
        if !changes.is_empty() {
            let _admin = self.admin.lock().await;
            self.reload().await?;
        }
        Ok(changes)
    }

    /// Refuse a run early, with a clear 503, when the graph store cannot be reached (a run would
    /// call tools and then fail to learn). A store that answered in the last second is not asked
    /// again; one that was down is asked on every request, so the daemon recovers by itself as
    /// soon as the store is back.
    async fn graph_reachable(&self) -> Result<(), ApiError> {
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let last = self.graph_ok_at_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < GRAPH_CHECK_EVERY.as_millis() as u64 {
            return Ok(());
        }
        let store = &self.backends.store;
        match tokio::time::timeout(Duration::from_secs(3), store.ping()).await {
            Ok(Ok(())) => {
                self.graph_ok_at_ms.store(now, Ordering::Relaxed);
                Ok(())
            }
            outcome => {
                self.graph_ok_at_ms.store(0, Ordering::Relaxed);
                let why = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "no answer in 3 s".to_string(),
                };
                Err(ApiError::unavailable(
                    "graph_unavailable",
                    format!("the graph store ({}) cannot be reached: {why}; retry shortly", store.backend()),
                    self.settings().server.retry_after_s,
                ))
            }
        }
    }

    /// A fresh id that is hard to guess: `prefix_` + 24 hex digits.
    fn new_id(&self, prefix: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut h = sha2::Sha256::new();
        use sha2::Digest;
        h.update(self.id_seed.to_le_bytes());
        h.update(n.to_le_bytes());
        h.update(self.started.elapsed().as_nanos().to_le_bytes());
        let d = h.finalize();
        format!("{prefix}_{}", d[..12].iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    /// The run id of a client's idempotency key: stable across restarts (the graph's ledger
    /// remembers learned runs by id), scoped to the caller's API key (one client never sees
    /// another's run by guessing its idempotency key).
    fn run_id_for_key(&self, api_key: &str, key: &str) -> String {
        use sha2::Digest;
        let d = sha2::Sha256::digest(format!("toolgraph-idempotency\u{0}{api_key}\u{0}{key}").as_bytes());
        format!("run_{}", d[..12].iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    /// Stop taking new runs: `/readyz` answers 503 from now on.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Runs executing now.
    pub fn runs_in_flight(&self) -> u64 {
        self.metrics.in_flight.load(Ordering::Relaxed)
    }
}

/// The router with every endpoint and layer.
pub fn router(d: Arc<Daemon>) -> Router {
    let s = d.settings().server.clone();
    let v1 = Router::new()
        .route("/v1/orchestrate", post(orchestrate))
        .route("/v1/models", get(list_models))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/sessions", post(create_session))
        .route("/v1/sessions/{id}", get(get_session).delete(delete_session))
        .route("/v1/tools", post(tools::register))
        .route("/v1/tools/search", get(tools::search))
        .route("/v1/tools/import-openapi", post(tools::import_openapi))
        .route("/v1/tools/{*id}", get(tools::get_tool).patch(tools::patch_tool))
        .route("/v1/graph/cypher", post(cypher))
        .route_layer(middleware::from_fn_with_state(d.clone(), authorize));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/openapi.json", get(openapi::document))
        .merge(v1)
        .fallback(|| async { ApiError::not_found("no such endpoint (see GET /openapi.json)") })
        .method_not_allowed_fallback(|| async { ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this endpoint does not take that method (see GET /openapi.json)") })
        .layer(middleware::from_fn_with_state(d.clone(), observe))
        .layer(DefaultBodyLimit::max(s.max_body_bytes))
        .with_state(d)
}

/// Serve until `shutdown` resolves, then drain: in-flight requests (and streamed runs) finish
/// within `server.shutdown_grace_s`.
pub async fn serve(listener: tokio::net::TcpListener, d: Arc<Daemon>, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
    let grace = Duration::from_secs(d.settings().server.shutdown_grace_s);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let dd = d.clone();
    let signal = async move {
        shutdown.await;
        dd.drain();
        let _ = stop_tx.send(true);
        tracing::info!("shutting down: draining {} in-flight runs", dd.runs_in_flight());
    };
    let app = router(d.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let server = axum::serve(listener, app).with_graceful_shutdown(signal);
    let maintenance = tokio::spawn(maintain(d.clone(), stop_rx.clone()));
    let _stop_maintenance = AbortOnDrop(maintenance);
    let mut stop = stop_rx;
    let deadline = async move {
        let _ = stop.wait_for(|s| *s).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        r = server => r,
        _ = deadline => {
            tracing::warn!("shutdown grace of {}s elapsed with {} runs in flight", grace.as_secs(), d.runs_in_flight());
            Ok(())
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often the engine's graph is reloaded when runs taught it something.
const REFRESH_EVERY: Duration = Duration::from_secs(5);

/// Background upkeep until shutdown: reload the graph the runs changed; probe degraded APIs.
async fn maintain(d: Arc<Daemon>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let probe_every = Duration::from_millis(d.settings().health.probe_every_ms.max(100));
    let tick = REFRESH_EVERY.min(probe_every);
    let mut last_probe = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if let Err(e) = d.refresh_graph().await {
            tracing::warn!(error = %e, "reloading the learned graph failed; the engine keeps the graph it has");
        }
        if d.settings().health.enabled && last_probe.elapsed() >= probe_every {
            last_probe = Instant::now();
            if let Err(e) = d.probe_degraded().await {
                tracing::warn!(error = %e, "probing degraded APIs failed");
            }
        }
    }
}

/// Time limit and metrics for every request.
async fn observe(State(d): State<Arc<Daemon>>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    let limit = Duration::from_millis(d.settings().server.request_timeout_ms.max(1));
    let r = match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::new(StatusCode::GATEWAY_TIMEOUT, "timeout", format!("the request took longer than {} ms", limit.as_millis())).into_response(),
    };
    d.metrics.request(&method, &route, r.status().as_u16());
    r
}

/// API key (when keys are configured) and rate limit for `/v1/*`.
async fn authorize(State(d): State<Arc<Daemon>>, req: Request, next: Next) -> Result<Response, ApiError> {
    let who = if d.keys.is_empty() {
        req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string()).unwrap_or_else(|| "anonymous".into())
    } else {
        let presented = presented_key(req.headers()).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "missing_api_key", "send an API key as `Authorization: Bearer KEY` or `X-API-Key: KEY`"))?;
        d.keys.check(presented).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", "the API key is not valid"))?
    };
    if let Err(wait) = d.limiter.take(&who) {
        d.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "too many requests for this key; retry later").with_retry_after(wait));
    }
    Ok(next.run(req).await)
}

fn presented_key(h: &HeaderMap) -> Option<&str> {
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        return v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")).map(str::trim);
    }
    h.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim)
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(d): State<Arc<Daemon>>) -> Result<Json<Value>, ApiError> {
    if d.draining.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable("draining", "shutting down", d.settings().server.retry_after_s));
    }
    let b = &d.backends;
    let limit = Duration::from_secs(3);
    let graph = tokio::time::timeout(limit, b.store.stats()).await;
    let vectors = tokio::time::timeout(limit, b.vectors.count(toolgraph_engine::vector::APIS)).await;
    fn problem<T>(r: &Result<toolgraph_engine::Result<T>, tokio::time::error::Elapsed>) -> String {
        match r {
            Ok(Ok(_)) => "ok".into(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".into(),
        }
    }
    match (graph, vectors) {
        (Ok(Ok(g)), Ok(Ok(n))) => Ok(Json(json!({"status": "ready", "graph": b.store.backend(), "apis": g.apis, "vectors": b.vectors.backend(), "indexed": n}))),
        (g, v) => Err(ApiError::unavailable(
            "not_ready",
            format!("graph store ({}): {}; vector store ({}): {}", b.store.backend(), problem(&g), b.vectors.backend(), problem(&v)),
            d.settings().server.retry_after_s,
        )),
    }
}

async fn metrics_text(State(d): State<Arc<Daemon>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], d.metrics.render())
}

/// `POST /v1/orchestrate`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestrateRequest {
    pub request: String,
    /// Continue this conversation (from an earlier answer, or `POST /v1/sessions`).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Values for parameters (the answer to a `needs_input`); kept for the session's next turns.
    #[serde(default)]
    pub given: Map<String, Value>,
    /// Stream the trace as Server-Sent Events (also `Accept: text/event-stream` or `?stream=true`).
    #[serde(default)]
    pub stream: bool,
    /// Who decides this run: `deterministic` or `llm` (default: the daemon's planner).
    #[serde(default)]
    pub planner: Option<String>,
    /// For the llm planner: a configured model name (`GET /v1/models`; default: `llm.default`).
    #[serde(default)]
    pub model: Option<String>,
    /// `graph`, `plan`, `dfs-no-graph` or `retrieve-greedy` (default: `run.mode`).
    #[serde(default)]
    pub mode: Option<String>,
    /// Target-first planning (Reverse Chain) for this run (default: `run.backward`).
    #[serde(default)]
    pub backward: Option<bool>,
}

/// The per-run choices of a request, checked.
fn run_options(d: &Daemon, r: &OrchestrateRequest) -> Result<toolgraph_engine::run::RunOptions, ApiError> {
    let mode = match r.mode.as_deref() {
        None => None,
        Some("graph") => Some(toolgraph_engine::run::Mode::Graph),
        Some("plan") => Some(toolgraph_engine::run::Mode::Plan),
        Some("dfs-no-graph") => Some(toolgraph_engine::run::Mode::DfsNoGraph),
        Some("retrieve-greedy") => Some(toolgraph_engine::run::Mode::RetrieveGreedy),
        Some(other) => return Err(ApiError::invalid(format!("`mode`: `{}` is not graph, plan, dfs-no-graph or retrieve-greedy", other.chars().take(40).collect::<String>()))),
    };
    let planner = match (r.planner.as_deref(), r.model.as_deref()) {
        (None, None) => None,
        (p, m) => Some(d.models.planner(p.unwrap_or("llm"), m).map_err(|e| ApiError::invalid(format!("`planner`/`model`: {}", e.chars().take(300).collect::<String>())))?),
    };
    Ok(toolgraph_engine::run::RunOptions { planner, mode, backward: r.backward })
}

/// `GET /v1/models`: the configured LLMs (never their keys) and the default.
async fn list_models(State(d): State<Arc<Daemon>>) -> Json<Value> {
    Json(json!({"default": d.models.default_name(), "planners": ["deterministic", "llm"], "models": d.models.list()}))
}

#[derive(Debug, Default, Deserialize)]
struct StreamQuery {
    #[serde(default)]
    stream: Option<bool>,
}

const MAX_GIVEN: usize = 50;
const MAX_GIVEN_VALUE_CHARS: usize = 4000;

fn validate_request(r: &OrchestrateRequest, max_chars: usize) -> Result<(), ApiError> {
    if r.request.trim().is_empty() {
        return Err(ApiError::invalid("`request` is empty"));
    }
    let n = r.request.chars().count();
    if n > max_chars {
        return Err(ApiError::invalid(format!("`request` has {n} characters; at most {max_chars} are accepted")));
    }
    if r.given.len() > MAX_GIVEN {
        return Err(ApiError::invalid(format!("`given` has {} values; at most {MAX_GIVEN}", r.given.len())));
    }
    for (k, v) in &r.given {
        if k.is_empty() || k.len() > 200 || v.to_string().len() > MAX_GIVEN_VALUE_CHARS {
            return Err(ApiError::invalid(format!("`given.{}`: names are 1..200 characters, values at most {MAX_GIVEN_VALUE_CHARS} characters of JSON", k.chars().take(40).collect::<String>())));
        }
    }
    Ok(())
}

/// The answer body: everything but the trace (which streams, or is added for plain answers).
fn result_body(run_id: &str, session_id: &str, r: &RunReport) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("run_id".into(), json!(run_id));
    m.insert("session_id".into(), json!(session_id));
    m.insert("status".into(), json!(r.status));
    m.insert("answer".into(), json!(r.answer));
    m.insert("chain".into(), json!(r.chain));
    m.insert("needs_input".into(), json!(r.needs_input));
    m.insert("judgement".into(), json!(r.judgement));
    m.insert("stats".into(), json!(r.stats));
    m
}

async fn orchestrate(State(d): State<Arc<Daemon>>, headers: HeaderMap, q: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>, ApiJson(body): ApiJson<OrchestrateRequest>) -> Result<Response, ApiError> {
    let q = q?.0;
    validate_request(&body, d.settings().server.max_request_chars)?;
    let opts = run_options(&d, &body)?;
    if d.draining.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable("draining", "the daemon is shutting down", d.settings().server.retry_after_s));
    }
    // A retried request (same Idempotency-Key) gets the run it already made: nothing runs, and
    // the graph does not learn from it twice (the run id, derived from the key, is the ledger key).
    let idempotent_id = match headers.get("idempotency-key") {
        None => None,
        Some(v) => {
            let k = v.to_str().ok().filter(|k| !k.is_empty() && k.len() <= 200 && k.bytes().all(|b| b.is_ascii_graphic())).ok_or_else(|| ApiError::invalid("Idempotency-Key: 1 to 200 visible ASCII characters"))?;
            Some(d.run_id_for_key(presented_key(&headers).unwrap_or_default(), k))
        }
    };
    if let Some(id) = &idempotent_id {
        let done = d.runs.lock().unwrap_or_else(|p| p.into_inner()).map.get(id).cloned();
        if let Some(stored) = done {
            let mut r = json_response(&stored);
            r.headers_mut().insert("idempotent-replayed", header::HeaderValue::from_static("true"));
            return Ok(r);
        }
    }
    d.graph_reachable().await?;
    let stream = body.stream || q.stream.unwrap_or(false) || headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
    // The session: earlier outputs and given values (this request's given values join them).
    let (session_id, earlier, given) = {
        let mut sessions = d.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let id = match &body.session_id {
            Some(id) => {
                if !sessions.map.contains_key(id) {
                    return Err(ApiError::not_found(format!("no session {id} (it may have expired; start a new one by leaving session_id out)")));
                }
                id.clone()
            }
            None => {
                let id = d.new_id("ses");
                sessions.insert(id.clone(), Session { turns: Vec::new(), earlier: Vec::new(), given: Map::new(), last_used: Instant::now() });
                id
            }
        };
        let s = sessions.map.get_mut(&id).ok_or_else(|| ApiError::internal("session vanished"))?;
        s.given.extend(body.given.clone());
        s.last_used = Instant::now();
        (id, s.earlier.clone(), s.given.clone())
    };
    let permit = d.in_flight.clone().try_acquire_owned().map_err(|_| {
        d.metrics.busy.fetch_add(1, Ordering::Relaxed);
        ApiError::unavailable("busy", format!("{} runs are in flight; retry shortly", d.settings().server.max_in_flight), d.settings().server.retry_after_s)
    })?;
    let run_id = idempotent_id.unwrap_or_else(|| d.new_id("run"));
    let engine = d.engine();
    let request = body.request.clone();
    if !stream {
        let dd = d.clone();
        let (rid, sid) = (run_id.clone(), session_id.clone());
        let task = tokio::spawn(async move {
            let _permit = permit;
            execute(&dd, &engine, &rid, &sid, &request, given, earlier, None, opts).await
        });
        let (_, stored) = task.await.map_err(|e| ApiError::internal(format!("the run stopped: {e}")))??;
        return Ok(json_response(&stored));
    }
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(256);
    let dd = d.clone();
    let (rid, sid) = (run_id.clone(), session_id.clone());
    tokio::spawn(async move {
        let _permit = permit;
        let _ = tx.send(Ok(Event::default().event("run").data(json!({"run_id": rid, "session_id": sid}).to_string()))).await;
        let (ttx, mut trx) = mpsc::channel::<TraceEvent>(256);
        let out = tx.clone();
        let forward = async move {
            while let Some(e) = trx.recv().await {
                if let Ok(ev) = Event::default().event("step").json_data(&e) {
                    // A client that went away does not stop the run; its result is kept.
                    let _ = out.send(Ok(ev)).await;
                }
            }
        };
        let run = async { execute(&dd, &engine, &rid, &sid, &request, given, earlier, Some(ttx), opts).await };
        let (result, ()) = tokio::join!(run, forward);
        let last = match result {
            Ok((body, _)) => Event::default().event("result").data(Value::Object(body).to_string()),
            Err(e) => Event::default().event("error").data(e.body().to_string()),
        };
        let _ = tx.send(Ok(last)).await;
    });
    Ok(Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response())
}

/// A JSON body from a stored value, serialized straight from it (no copy of the trace).
fn json_response(v: &Value) -> Response {
    match serde_json::to_vec(v) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// Run one request of a session; store the run, update the session, count it. Returns the result
/// body without the trace (what the stream's `result` event carries) and the stored run (the
/// result with the request and the trace: the plain answer and `GET /v1/runs/{id}`).
#[allow(clippy::too_many_arguments)]
async fn execute(
    d: &Daemon,
    engine: &Engine,
    run_id: &str,
    session_id: &str,
    request: &str,
    given: Map<String, Value>,
    earlier: Vec<Earlier>,
    sink: Option<mpsc::Sender<TraceEvent>>,
    opts: toolgraph_engine::run::RunOptions,
) -> Result<(Map<String, Value>, Arc<Value>), ApiError> {
    d.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
    let t = Instant::now();
    let result = engine.run_with(request, given, earlier, sink.as_ref(), opts).await;
    drop(sink);
    d.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            d.metrics.run("error", t.elapsed().as_secs_f64(), 0, 0);
            return Err(e.into());
        }
    };
    let status = report.status.as_str();
    // The graph learns from the run (counts, the answered chain, failing APIs); a failure to
    // learn is logged, never the user's error.
    match engine.learn_from(run_id, &report).await {
        Ok(l) => {
            if l.learned.applied || !l.status_changes.is_empty() {
                d.learned_since_refresh.store(true, Ordering::SeqCst);
            }
        }
        Err(e) => tracing::error!(run_id, error = %e, "learning from the run failed"),
    }
    d.metrics.run(status, t.elapsed().as_secs_f64(), report.stats.http_calls as u64, report.stats.failed_calls as u64);
    d.metrics.llm(&report.stats.llm);
    let body = result_body(run_id, session_id, &report);
    let mut stored = body.clone();
    stored.insert("request".into(), json!(request));
    stored.insert("trace".into(), json!(report.trace));
    let stored = Arc::new(Value::Object(stored));
    d.runs.lock().unwrap_or_else(|p| p.into_inner()).insert(run_id.to_string(), stored.clone());
    {
        let keep = d.settings().server.session_turns.max(1);
        let mut sessions = d.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = sessions.map.get_mut(session_id) {
            let turn = s.turns.len() + 1;
            s.turns.push(json!({"turn": turn, "run_id": run_id, "request": request, "status": report.status, "answer": report.answer}));
            for (c, resp) in report.chain.iter().zip(&report.responses) {
                s.earlier.push(Earlier::new(turn, request, &c.api, resp.clone()));
            }
            let oldest = turn.saturating_sub(keep) + 1;
            s.earlier.retain(|e| e.turn >= oldest);
            s.last_used = Instant::now();
        }
    }
    Ok((body, stored))
}

async fn get_run(State(d): State<Arc<Daemon>>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let r = d.runs.lock().unwrap_or_else(|p| p.into_inner()).map.get(&id).cloned();
    let r = r.ok_or_else(|| ApiError::not_found(format!("no run {id} (only the last {} runs are kept)", d.settings().server.runs_kept)))?;
    Ok(json_response(&r))
}

async fn create_session(State(d): State<Arc<Daemon>>) -> (StatusCode, Json<Value>) {
    let id = d.new_id("ses");
    d.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), Session { turns: Vec::new(), earlier: Vec::new(), given: Map::new(), last_used: Instant::now() });
    (StatusCode::CREATED, Json(json!({"session_id": id})))
}

async fn get_session(State(d): State<Arc<Daemon>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let sessions = d.sessions.lock().unwrap_or_else(|p| p.into_inner());
    let s = sessions.map.get(&id).ok_or_else(|| ApiError::not_found(format!("no session {id}")))?;
    Ok(Json(json!({"session_id": id, "turns": s.turns, "given": s.given, "idle_s": s.last_used.elapsed().as_secs()})))
}

async fn delete_session(State(d): State<Arc<Daemon>>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let mut sessions = d.sessions.lock().unwrap_or_else(|p| p.into_inner());
    sessions.map.remove(&id).ok_or_else(|| ApiError::not_found(format!("no session {id}")))?;
    sessions.order.retain(|x| x != &id);
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/graph/cypher`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CypherRequest {
    query: String,
    #[serde(default)]
    params: Map<String, Value>,
}

const MAX_QUERY_CHARS: usize = 10_000;

async fn cypher(State(d): State<Arc<Daemon>>, ApiJson(body): ApiJson<CypherRequest>) -> Result<Json<Value>, ApiError> {
    let store = &d.backends.store;
    if store.backend() == "embedded" {
        return Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "cypher_unsupported", "the embedded graph store has no Cypher; run the daemon on FalkorDB (falkordb://) or Neo4j (neo4j://) to query the graph"));
    }
    if body.query.trim().is_empty() || body.query.len() > MAX_QUERY_CHARS {
        return Err(ApiError::invalid(format!("`query` must be 1..{MAX_QUERY_CHARS} characters")));
    }
    let s = &d.settings().store;
    let limits = toolgraph_engine::graph::CypherLimits { max_rows: s.query_max_rows, timeout_ms: s.query_timeout_ms };
    match store.cypher_read(&body.query, body.params, limits).await {
        Ok(rows) => Ok(Json(json!(rows))),
        Err(e) if e.class() == toolgraph_engine::ErrorClass::Transient => Err(e.into()),
        Err(e) => Err(ApiError::invalid(format!("{e}")).with_code("cypher_error")),
    }
}
