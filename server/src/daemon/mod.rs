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

mod accounts;
mod approvals;
pub mod console;
pub mod error;
mod history;
pub mod limits;
pub mod metrics;
mod openapi;
mod tools;

use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Extension;
use axum::{Json, Router};
use error::{ApiError, ApiJson};
use limits::{ApiKeys, RateLimiter};
use metrics::Metrics;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
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
use crate::state::{Caller, RunRecord, Role, StateStore};
use tracing::Instrument;

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
    /// Durable state (users, sessions, runs, …); a throw-away in-memory SQLite store when `None`.
    pub state: Option<Arc<StateStore>>,
}

/// A conversation, as stored: earlier turns' outputs and the values the user gave carry into the
/// next run (any replica of the deployment can serve the next turn).
#[derive(Debug, Default, Serialize, Deserialize)]
struct SessionState {
    #[serde(default)]
    turns: Vec<Value>,
    #[serde(default)]
    earlier: Vec<EarlierRecord>,
    #[serde(default)]
    given: Map<String, Value>,
}

#[derive(Debug, Serialize, Deserialize)]
struct EarlierRecord {
    turn: usize,
    request: String,
    api: String,
    response: Value,
}

impl SessionState {
    fn of(v: Value) -> Self {
        serde_json::from_value(v).unwrap_or_default()
    }
    fn earlier(&self) -> Vec<Earlier> {
        self.earlier.iter().map(|e| Earlier::new(e.turn, &e.request, &e.api, Arc::new(e.response.clone()))).collect()
    }
}

/// How long a looked-up API key is trusted before the store is asked again (revocations on
/// another replica take effect within this; on the same replica at once).
const KEY_CACHE_TTL: Duration = Duration::from_secs(5);
const KEY_CACHE_MAX: usize = 10_000;
/// Turn summaries a session keeps (older turns stay in the run history).
const MAX_SESSION_TURNS: usize = 100;
/// Given values a session keeps across its turns.
const MAX_SESSION_GIVEN: usize = 200;

/// The daemon's shared state.
pub struct Daemon {
    backends: Backends,
    queries: Arc<dyn Embedder>,
    engine: RwLock<Arc<Engine>>,
    /// Serializes registrations, invalidations and imports (each re-indexes and reloads).
    admin: tokio::sync::Mutex<()>,
    /// Durable state: users, keys, sessions, runs, chains, credentials, approvals, audit.
    pub state: Arc<StateStore>,
    /// Seals tool credentials at rest (`TOOLGRAPH_SECRET_KEY(_FILE)`); without it credentials can
    /// only be referenced (`env:` / `file:`).
    sealing: Option<crate::state::secrets::SealingKey>,
    /// APIs whose calls wait for a person's approval.
    approval_apis: RwLock<Arc<HashSet<String>>>,
    /// Key digest → caller (or `None`: not a valid key), with when it was looked up.
    key_cache: Mutex<HashMap<String, (Option<Caller>, Instant)>>,
    /// Keys are required: bootstrap keys are configured or users have keys.
    auth_required: AtomicBool,
    /// (count, newest change) of the stored credentials the executor holds.
    credentials_version: Mutex<(i64, i64)>,
    /// Runs this daemon is executing now (a paused run it holds is not resumed twice).
    active_runs: Mutex<HashSet<String>>,
    /// Their tasks: what shutdown stops (paused runs are handed to the other replicas).
    run_tasks: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    keys: ApiKeys,
    limiter: RateLimiter,
    /// Console login attempts, per address and per name: 10 at once, then one every 6 s.
    login_limiter: RateLimiter,
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
    /// MCP servers whose tools are APIs (the executor's remote port).
    #[cfg(feature = "mcp")]
    pub mcp: Arc<crate::mcp::McpHub>,
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
        let state = match &backends.state {
            Some(st) => st.clone(),
            None => Arc::new(StateStore::memory().await.map_err(|e| toolgraph_engine::EngineError::Config(e.0))?),
        };
        let sealing = crate::state::secrets::SealingKey::from_env().map_err(toolgraph_engine::EngineError::Config)?;
        let auth_required = !keys.is_empty() || state.has_keys().await.map_err(|e| toolgraph_engine::EngineError::Config(e.0))?;
        #[cfg(feature = "mcp")]
        let mcp = {
            let hub = crate::mcp::McpHub::from_state(&state, Some(backends.executor.clone())).await.map_err(toolgraph_engine::EngineError::Config)?;
            backends.executor.set_remote(hub.clone());
            hub
        };
        let d = Arc::new(Daemon {
            #[cfg(feature = "mcp")]
            mcp,
            engine: RwLock::new(Arc::new(engine)),
            queries,
            admin: tokio::sync::Mutex::new(()),
            state,
            sealing,
            approval_apis: RwLock::new(Arc::new(HashSet::new())),
            key_cache: Mutex::new(HashMap::new()),
            auth_required: AtomicBool::new(auth_required),
            credentials_version: Mutex::new((-1, -1)),
            active_runs: Mutex::new(HashSet::new()),
            run_tasks: Mutex::new(HashMap::new()),
            limiter: RateLimiter::new(s.rate_per_s, s.rate_burst),
            login_limiter: RateLimiter::new(1.0 / 6.0, 10.0),
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
        });
        d.sync_state().await.map_err(|e| toolgraph_engine::EngineError::Config(e.message))?;
        Ok(d)
    }

    /// Take in what other replicas (or the CLI) changed in the shared state: credentials,
    /// approval marks, whether keys are required.
    pub async fn sync_state(&self) -> Result<(), ApiError> {
        let version = self.state.credentials_version().await?;
        let changed = { *self.credentials_version.lock().unwrap_or_else(|p| p.into_inner()) != version };
        if changed {
            self.reload_credentials().await?;
            *self.credentials_version.lock().unwrap_or_else(|p| p.into_inner()) = version;
        }
        let apis: HashSet<String> = self.state.requires_approval().await?.into_iter().collect();
        *self.approval_apis.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(apis);
        if !self.auth_required.load(Ordering::Relaxed) && self.state.has_keys().await? {
            self.auth_required.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Load the stored credentials into the executor; entries that cannot be opened are logged by
    /// scope and name (never a value) and left out.
    async fn reload_credentials(&self) -> Result<(), ApiError> {
        let rows = self.state.credentials().await?;
        let (set, problems) = crate::state::secrets::credential_set(&rows, self.sealing.as_ref());
        for p in problems {
            tracing::error!(credential = %p, "a stored credential cannot be used");
        }
        tracing::info!(credentials = set.len(), "tool credentials loaded");
        self.backends.executor.set_credentials(set);
        Ok(())
    }

    fn approval_apis(&self) -> Arc<HashSet<String>> {
        self.approval_apis.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The caller a presented key belongs to (bootstrap keys are admins).
    async fn caller_of(&self, presented: &str) -> Result<Option<Caller>, ApiError> {
        if let Some(id) = self.keys.check(presented) {
            return Ok(Some(Caller { user_id: "bootstrap".into(), name: format!("bootstrap key {id}"), role: Role::Admin }));
        }
        let digest = crate::state::key_digest(presented);
        if let Some((c, at)) = self.key_cache.lock().unwrap_or_else(|p| p.into_inner()).get(&digest) {
            if at.elapsed() < KEY_CACHE_TTL {
                return Ok(c.clone());
            }
        }
        let c = self.state.caller_of_key(presented).await?;
        let mut cache = self.key_cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= KEY_CACHE_MAX {
            cache.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_TTL);
            if cache.len() >= KEY_CACHE_MAX {
                cache.clear();
            }
        }
        cache.insert(digest, (c.clone(), Instant::now()));
        Ok(c)
    }

    /// Forget cached key lookups (after a revocation).
    fn forget_keys(&self) {
        self.key_cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Append to the audit log; a failure is logged, never the caller's error.
    async fn audit(&self, who: &Caller, action: &str, target: &str, detail: Value) {
        if let Err(e) = self.state.audit(&who.name, action, target, detail).await {
            tracing::error!(error = %e, action, "audit log");
        }
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
    fn run_id_for_key(&self, user: &str, api_key: &str, key: &str) -> String {
        use sha2::Digest;
        let d = sha2::Sha256::digest(format!("toolgraph-idempotency\u{0}{user}\u{0}{api_key}\u{0}{key}").as_bytes());
        format!("run_{}", d[..12].iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    /// At the end of shutdown: stop the runs still going (they are paused, or past the grace
    /// period) and release paused runs' leases so that another daemon resumes them at once.
    pub async fn abandon_runs(&self) {
        let tasks: Vec<(String, tokio::task::AbortHandle)> = self.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).drain().collect();
        for (id, h) in &tasks {
            h.abort();
            if let Err(e) = self.state.release_lease(id).await {
                tracing::warn!(run_id = %id, error = %e, "releasing a paused run failed; it is resumed when its lease lapses");
            }
        }
        // An aborted task ends at its next await; wait for that (bounded), so what the runs held
        // (stores, files) is let go before `serve` returns.
        let until = Instant::now() + ABANDON_WAIT;
        while tasks.iter().any(|(_, h)| !h.is_finished()) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
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

/// The `/v1` endpoints, without authentication: each request must carry its [`Caller`] (and a
/// [`console::ConsoleLogin`]) in its extensions. [`router`] puts `authorize` in front; the MCP
/// server calls them in-process for the caller it has authenticated.
pub(crate) fn api_routes() -> Router<Arc<Daemon>> {
    Router::new()
        .route("/v1/orchestrate", post(orchestrate))
        .route("/v1/models", get(list_models))
        .route("/v1/me", get(accounts::me))
        .route("/v1/runs", get(history::list_runs))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/rerun", post(history::rerun))
        .route("/v1/runs/{id}/approve", post(approvals::approve))
        .route("/v1/runs/{id}/reject", post(approvals::reject))
        .route("/v1/sessions", post(create_session).get(list_sessions))
        .route("/v1/sessions/{id}", get(get_session).delete(delete_session))
        .route("/v1/chains", post(history::save_chain).get(history::list_chains))
        .route("/v1/chains/execute", post(history::execute_chain))
        .route("/v1/chains/{id}", get(history::get_chain).delete(history::delete_chain))
        .route("/v1/tools", post(tools::register).get(console::list_apis))
        .route("/v1/tools/search", get(tools::search))
        .route("/v1/tools/import-openapi", post(tools::import_openapi))
        .route("/v1/tools/{*id}", get(tools::get_tool).patch(tools::patch_tool))
        .route("/v1/graph/cypher", post(cypher))
        .route("/v1/users", get(accounts::list_users).post(accounts::add_user))
        .route("/v1/users/{id}/keys", get(accounts::list_keys).post(accounts::add_key))
        .route("/v1/keys/{id}", axum::routing::delete(accounts::revoke_key))
        .route("/v1/credentials", get(accounts::list_credentials))
        .route("/v1/credentials/{*scope}", put(accounts::put_credentials).delete(accounts::delete_credentials))
        .route("/v1/audit", get(accounts::audit_log))
        .route("/v1/mcp-servers", get(mcp_servers).post(add_mcp_server))
        .route("/v1/categories", get(console::categories))
        .route("/v1/graph/neighborhood", get(console::neighbourhood))
        .route("/v1/memory", get(console::list_memory))
        .route("/v1/memory/{id}", axum::routing::delete(console::delete_memory))
        .route("/v1/settings", get(console::settings))
        .route("/v1/chains/check", post(console::check_chain))
}

/// The router with every endpoint and layer.
pub fn router(d: Arc<Daemon>) -> Router {
    let s = d.settings().server.clone();
    let v1 = api_routes().route_layer(middleware::from_fn_with_state(d.clone(), authorize));
    #[cfg(feature = "mcp")]
    let v1 = v1.merge(Router::new().route_service("/mcp", crate::mcp_serve::http_service(d.clone())).route_layer(middleware::from_fn_with_state(d.clone(), authorize)));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/openapi.json", get(openapi::document))
        .route("/", get(console::index))
        .route("/assets/{*path}", get(console::asset))
        .route("/v1/login", post(console::login))
        .route("/v1/logout", post(console::logout))
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
    let mut maintenance = AbortOnDrop(tokio::spawn(maintain(d.clone(), stop_rx.clone())));
    let mut stop = stop_rx;
    let deadline = async move {
        let _ = stop.wait_for(|s| *s).await;
        tokio::time::sleep(grace).await;
    };
    let out = tokio::select! {
        r = server => r,
        _ = deadline => {
            tracing::warn!("shutdown grace of {}s elapsed with {} runs in flight", grace.as_secs(), d.runs_in_flight());
            Ok(())
        }
    };
    d.abandon_runs().await;
    // Upkeep saw the stop: let it finish the round it is in (bounded), so nothing it writes is
    // cut off and every task this daemon started has ended when `serve` returns (an in-process
    // restart can open the same embedded stores again at once).
    maintenance.finish(grace.max(ABANDON_WAIT)).await;
    out
}

/// The daemon's background upkeep ([`maintain`]) for a server that is not [`serve`] (`toolgraph
/// mcp` on stdio): the graph the runs taught is reloaded, paused runs resumed, retention kept.
pub struct Upkeep {
    stop: tokio::sync::watch::Sender<bool>,
    task: AbortOnDrop,
}

impl Upkeep {
    pub fn start(d: Arc<Daemon>) -> Upkeep {
        let (stop, rx) = tokio::sync::watch::channel(false);
        Upkeep { stop, task: AbortOnDrop(tokio::spawn(maintain(d, rx))) }
    }

    /// Stop: the round in progress finishes (within `ABANDON_WAIT`), then runs still going are
    /// abandoned as at a daemon's shutdown.
    pub async fn stop(mut self, d: &Daemon) {
        let _ = self.stop.send(true);
        self.task.finish(ABANDON_WAIT).await;
        d.abandon_runs().await;
    }
}

/// How long an aborted run gets to let go of what it holds.
const ABANDON_WAIT: Duration = Duration::from_secs(5);

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    /// Wait for the task to end on its own for at most `wait`, else end it (and wait for that).
    async fn finish(&mut self, wait: Duration) {
        if tokio::time::timeout(wait, &mut self.0).await.is_err() {
            self.0.abort();
            let _ = (&mut self.0).await;
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often the engine's graph is reloaded when runs taught it something.
const REFRESH_EVERY: Duration = Duration::from_secs(5);

/// Follow the MCP servers' `notifications/tools/list_changed`: import the server's tools again
/// (new ones admitted, removed ones invalidated), re-index, reload.
#[cfg(feature = "mcp")]
async fn follow_mcp(d: Arc<Daemon>) {
    let Some(mut changes) = d.mcp.take_changes() else { return };
    while let Some(server) = changes.recv().await {
        let _admin = d.admin.lock().await;
        match crate::mcp::import(&d.mcp, &server, d.backends.store.as_ref()).await {
            Ok(i) => {
                tracing::info!(server = %server, tools = i.admitted.len(), invalidated = i.invalidated.len(), "MCP server's tools imported again");
                if let Err(e) = d.reload().await {
                    tracing::warn!(error = %e, "reloading after an MCP tool list change failed");
                }
            }
            Err(e) => tracing::warn!(server = %server, error = %e, "importing an MCP server's changed tools failed"),
        }
    }
}

/// Background upkeep until `stop`: reload the graph the runs changed; probe degraded APIs; take
/// in what other replicas changed (credentials, approval marks, keys); resume paused runs whose
/// daemon went away; enforce retention; follow imported MCP servers' tool lists.
async fn maintain(d: Arc<Daemon>, mut stop: tokio::sync::watch::Receiver<bool>) {
    #[cfg(feature = "mcp")]
    let _follower = AbortOnDrop(tokio::spawn(follow_mcp(d.clone())));
    let probe_every = Duration::from_millis(d.settings().health.probe_every_ms.max(100));
    let lease = Duration::from_millis(d.settings().server.approval_lease_ms.max(100));
    let tick = REFRESH_EVERY.min(probe_every).min(lease);
    let retention_every = Duration::from_secs(d.settings().state.retention_every_s.max(1));
    let mut last_probe = Instant::now();
    let mut last_retention: Option<Instant> = None;
    loop {
        if let Err(e) = d.sync_state().await {
            tracing::warn!(error = %e, "reading the shared state failed");
        }
        if let Err(e) = approvals::resume_orphans(&d).await {
            tracing::warn!(error = %e, "resuming paused runs failed");
        }
        if last_retention.is_none_or(|t| t.elapsed() >= retention_every) {
            last_retention = Some(Instant::now());
            let st = &d.settings().state;
            match d.state.enforce_retention(st.retention_days, st.retention_runs, st.audit_days).await {
                Ok(p) if p.runs + p.sessions + p.audit > 0 => tracing::info!(runs = p.runs, sessions = p.sessions, audit = p.audit, "retention removed old state"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "retention failed"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        match d.refresh_graph().await {
            Ok(true) => tracing::debug!("reloaded the graph: the runs taught it"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "reloading the learned graph failed; the engine keeps the graph it has"),
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

/// Who calls `/v1/*` (a [`Caller`] in the request's extensions) and their rate limit. Keys are
/// required once bootstrap keys are configured or any user has a key; before that (a fresh local
/// daemon on loopback) the caller is the local administrator.
async fn authorize(State(d): State<Arc<Daemon>>, mut req: Request, next: Next) -> Result<Response, ApiError> {
    let mut login = console::ConsoleLogin::default();
    let (caller, bucket) = if !d.auth_required.load(Ordering::Relaxed) {
        let ip = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string()).unwrap_or_else(|| "anonymous".into());
        (Caller { user_id: "local".into(), name: "local".into(), role: Role::Admin }, ip)
    } else if let (None, Some(token)) = (presented_key(req.headers()), console::session_cookie(req.headers())) {
        // A console login: its state-changing requests must echo the login's CSRF token.
        let (c, csrf) = d.state.login(token).await?.ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "login_expired", "the console login has ended or expired: log in again"))?;
        let safe = matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS);
        let echoed = req.headers().get(console::CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !safe && !console::same_token(echoed, &csrf) {
            return Err(ApiError::new(StatusCode::FORBIDDEN, "csrf_failed", "this request needs the login's CSRF token in `X-CSRF-Token`"));
        }
        login.csrf = Some(csrf);
        let bucket = c.user_id.clone();
        (c, bucket)
    } else {
        let presented = presented_key(req.headers()).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "missing_api_key", "send an API key as `Authorization: Bearer KEY` or `X-API-Key: KEY` (or log in to the console)"))?;
        if presented.is_empty() || presented.len() > 200 {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", "the API key is not valid"));
        }
        let c = d.caller_of(presented).await?.ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", "the API key is not valid (unknown, revoked or expired)"))?;
        let bucket = c.user_id.clone();
        (c, bucket)
    };
    if let Err(wait) = d.limiter.take(&bucket) {
        d.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "too many requests for this key; retry later").with_retry_after(wait));
    }
    req.extensions_mut().insert(caller);
    req.extensions_mut().insert(login);
    Ok(next.run(req).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMcpServer {
    name: String,
    url: String,
}

/// `POST /v1/mcp-servers {name, url}` (administrators): connect to a Streamable HTTP MCP server
/// (its URL through the SSRF guard), import its tools as APIs (category `mcp`), re-index. stdio
/// servers (a command to run) come only from operators: `toolgraph tools add-mcp --command`.
#[cfg(feature = "mcp")]
async fn add_mcp_server(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, ApiJson(b): ApiJson<NewMcpServer>) -> Result<(StatusCode, Json<Value>), ApiError> {
    require_admin(&caller, "adding MCP servers")?;
    let def = crate::mcp::McpServer { name: b.name, command: None, url: Some(b.url) };
    def.check().map_err(ApiError::invalid)?;
    let _admin = d.admin.lock().await;
    let known = d.mcp.status().iter().any(|s| s["name"] == def.name.as_str());
    d.mcp.add(def.clone());
    let imported = match crate::mcp::import(&d.mcp, &def.name, d.backends.store.as_ref()).await {
        Ok(i) => i,
        Err(e) => {
            if !known {
                d.mcp.remove(&def.name);
            }
            return Err(ApiError::unprocessable("mcp_unreachable", e));
        }
    };
    d.state.put_mcp_server(&def, &caller.name).await?;
    d.reload().await?;
    d.audit(&caller, "mcp.add", &def.name, json!({"url": def.url, "tools": imported.admitted.len()})).await;
    Ok((StatusCode::CREATED, Json(json!(imported))))
}

#[cfg(not(feature = "mcp"))]
async fn add_mcp_server(Extension(_caller): Extension<Caller>, ApiJson(_b): ApiJson<NewMcpServer>) -> Result<(StatusCode, Json<Value>), ApiError> {
    Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "not_built", "this toolgraph was built without the `mcp` feature"))
}

/// `GET /v1/mcp-servers` (administrators): each server's transport, connection and last error.
async fn mcp_servers(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "MCP servers")?;
    #[cfg(feature = "mcp")]
    let list = d.mcp.status();
    #[cfg(not(feature = "mcp"))]
    let list: Vec<Value> = {
        let _ = &d;
        Vec::new()
    };
    Ok(Json(json!({"servers": list})))
}

/// Admins only: 403 with the error contract otherwise.
fn require_admin(c: &Caller, what: &str) -> Result<(), ApiError> {
    if c.is_admin() {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("{what} is for administrators; this key belongs to user `{}`", c.name)))
    }
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
        (Ok(Ok(g)), Ok(Ok(n))) => {
            let mut body = json!({"status": "ready", "graph": b.store.backend(), "apis": g.apis, "vectors": b.vectors.backend(), "indexed": n});
            // MCP servers do not make the daemon unready (their APIs fail like any API that is down).
            #[cfg(feature = "mcp")]
            if !d.mcp.is_empty() {
                body["mcp"] = json!(d.mcp.status());
            }
            Ok(Json(body))
        }
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
    /// Plan only: nothing is sent, learned or remembered; the chain comes back with its data flow.
    #[serde(default)]
    pub dry_run: bool,
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
    Ok(toolgraph_engine::run::RunOptions { planner, mode, backward: r.backward, approver: None, dry_run: r.dry_run })
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

async fn orchestrate(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, headers: HeaderMap, q: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>, ApiJson(body): ApiJson<OrchestrateRequest>) -> Result<Response, ApiError> {
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
            Some(d.run_id_for_key(&caller.user_id, presented_key(&headers).unwrap_or_default(), k))
        }
    };
    if let Some(id) = &idempotent_id {
        if let Some(done) = d.state.run(id).await?.filter(|r| r.user_id == caller.user_id) {
            let mut r = json_response(&run_view(&done));
            r.headers_mut().insert("idempotent-replayed", header::HeaderValue::from_static("true"));
            return Ok(r);
        }
    }
    d.graph_reachable().await?;
    let stream = wants_stream(body.stream, q.stream, &headers);
    // The session: earlier outputs and given values (this request's given values join them).
    let (session_id, mut session) = match &body.session_id {
        Some(id) => {
            let (owner, st, _) = d.state.session(id).await?.filter(|(owner, _, _)| owner == &caller.user_id).ok_or_else(|| ApiError::not_found(format!("no session {id} (it may have expired; start a new one by leaving session_id out)")))?;
            debug_assert_eq!(owner, caller.user_id);
            (id.clone(), SessionState::of(st))
        }
        None => (d.new_id("ses"), SessionState::default()),
    };
    session.given.extend(body.given.clone());
    if session.given.len() > MAX_SESSION_GIVEN {
        return Err(ApiError::invalid(format!("the session holds more than {MAX_SESSION_GIVEN} given values; start a new session")));
    }
    let run_id = idempotent_id.unwrap_or_else(|| d.new_id("run"));
    let options = json!({"planner": body.planner, "model": body.model, "mode": body.mode, "backward": body.backward, "given": body.given, "dry_run": body.dry_run});
    let work = Work::Ask { given: session.given.clone(), earlier: session.earlier(), opts };
    let job = Job { run_id, session_id, caller, request: body.request.clone(), options, session: Some(json!(session)), work, resumed: false };
    start_run(d, job, stream).await
}

fn wants_stream(body: bool, query: Option<bool>, headers: &HeaderMap) -> bool {
    body || query.unwrap_or(false) || headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"))
}

/// What a run does: a request the engine plans, or a chain a person wrote.
pub(crate) enum Work {
    Ask { given: Map<String, Value>, earlier: Vec<Earlier>, opts: toolgraph_engine::run::RunOptions },
    Chain { chain: Value, given: Map<String, Value>, opts: toolgraph_engine::run::RunOptions },
}

/// One run to execute, with whom and where it belongs.
pub(crate) struct Job {
    pub run_id: String,
    pub session_id: String,
    pub caller: Caller,
    pub request: String,
    /// How it was asked (what a re-run or a resumed run reuses).
    pub options: Value,
    /// The session's state to store with the run's first record (`None`: leave the session as is).
    pub session: Option<Value>,
    pub work: Work,
    /// A paused run another daemon let go of, taken over by this one: its record (still
    /// `awaiting_approval`, with the call it waits on) stays as it is until the run pauses again
    /// or ends, so a decision given meanwhile is taken.
    pub resumed: bool,
}

/// Record the run, then execute it: plainly (the result, or 202 when it pauses for approval) or
/// streamed as Server-Sent Events.
pub(crate) async fn start_run(d: Arc<Daemon>, job: Job, stream: bool) -> Result<Response, ApiError> {
    let permit = d.in_flight.clone().try_acquire_owned().map_err(|_| {
        d.metrics.busy.fetch_add(1, Ordering::Relaxed);
        ApiError::unavailable("busy", format!("{} runs are in flight; retry shortly", d.settings().server.max_in_flight), d.settings().server.retry_after_s)
    })?;
    let now = crate::state::now_ms();
    let (rid, sid) = (job.run_id.clone(), job.session_id.clone());
    // A resumed run keeps its claim on the paused record while it replays the calls before the
    // one that waits (the approver renews it once the run is paused again).
    let renewing = job.resumed.then(|| {
        let (st, id) = (d.state.clone(), rid.clone());
        let lease = d.settings().server.approval_lease_ms.max(100);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(lease / 3)).await;
                if let Err(e) = st.renew_lease(&id, lease as i64).await {
                    tracing::warn!(error = %e, "renewing a resumed run's lease failed");
                }
            }
        })
    });
    let stop_renewing = move || {
        if let Some(h) = &renewing {
            h.abort();
        }
    };
    if !job.resumed {
        d.state
        .start_run(&RunRecord {
            id: rid.clone(),
            user_id: job.caller.user_id.clone(),
            session_id: sid.clone(),
            request: job.request.clone(),
            options: job.options.clone(),
            status: "running".into(),
            tools: Vec::new(),
            body: json!({"run_id": rid, "session_id": sid, "status": "running", "request": job.request}),
            pending: None,
            lease_until_ms: None,
            created_ms: now,
            finished_ms: None,
            duration_ms: None,
        }, job.session.as_ref())
        .await?;
    }
    let (pause_tx, mut pause_rx) = mpsc::channel::<Value>(4);
    let approver = approvals::RunApprover::new(&d, &job, pause_tx, permit);
    if !stream {
        let dd = d.clone();
        let mut task = tokio::spawn(async move {
            let out = execute(&dd, job, None, approver).await;
            stop_renewing();
            out
        });
        d.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).insert(rid.clone(), task.abort_handle());
        tokio::select! {
            r = &mut task => {
                d.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).remove(&rid);
                let (_, stored) = r.map_err(|e| ApiError::internal(format!("the run stopped: {e}")))??;
                return Ok(json_response(&stored));
            }
            Some(pending) = pause_rx.recv() => {
                // The run waits for a person; it goes on in the background (GET /v1/runs/{id}).
                let body = json!({"run_id": rid, "session_id": sid, "status": "awaiting_approval", "pending": pending});
                return Ok((StatusCode::ACCEPTED, Json(body)).into_response());
            }
        }
    }
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(256);
    let dd = d.clone();
    let task_id = rid.clone();
    let task = tokio::spawn(async move {
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
        let run = async {
            let out = execute(&dd, job, Some(ttx), approver).await;
            stop_renewing();
            out
        };
        let (result, ()) = tokio::join!(run, forward);
        let last = match result {
            Ok((body, _)) => Event::default().event("result").data(Value::Object(body).to_string()),
            Err(e) => Event::default().event("error").data(e.body().to_string()),
        };
        let _ = tx.send(Ok(last)).await;
    });
    d.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).insert(task_id, task.abort_handle());
    Ok(Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response())
}

/// A JSON body from a stored value, serialized straight from it (no copy of the trace).
fn json_response(v: &Value) -> Response {
    match serde_json::to_vec(v) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// A stored run as the API shows it: its body, with the call it waits on while paused.
fn run_view(r: &RunRecord) -> Value {
    let mut body = r.body.clone();
    if let Value::Object(m) = &mut body {
        m.insert("status".into(), json!(r.status));
        m.insert("user_id".into(), json!(r.user_id));
        m.insert("created_ms".into(), json!(r.created_ms));
        if let Some(p) = &r.pending {
            m.insert("pending".into(), p.clone());
        }
    }
    body
}

/// Run one job; store the run, update the session, count it. Returns the result body without the
/// trace (what the stream's `result` event carries) and the stored run (the result with the
/// request and the trace: the plain answer and `GET /v1/runs/{id}`).
async fn execute(d: &Daemon, job: Job, sink: Option<mpsc::Sender<TraceEvent>>, approver: Arc<approvals::RunApprover>) -> Result<(Map<String, Value>, Arc<Value>), ApiError> {
    let span = tracing::info_span!("run", run_id = %job.run_id, user = %job.caller.name);
    async move {
        d.active_runs.lock().unwrap_or_else(|p| p.into_inner()).insert(job.run_id.clone());
        let out = execute_inner(d, &job, sink, approver).await;
        d.active_runs.lock().unwrap_or_else(|p| p.into_inner()).remove(&job.run_id);
        d.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).remove(&job.run_id);
        if let Err(e) = &out {
            // The run's record says how it ended, even when it ended in an error.
            let body = json!({"run_id": job.run_id, "session_id": job.session_id, "status": "error", "request": job.request, "error": e.body()});
            if let Ok(Some(mut r)) = d.state.run(&job.run_id).await {
                r.status = "error".into();
                r.body = body;
                r.pending = None;
                r.finished_ms = Some(crate::state::now_ms());
                let _ = d.state.put_run(&r).await;
            }
        }
        out
    }
    .instrument(span)
    .await
}

async fn execute_inner(d: &Daemon, job: &Job, sink: Option<mpsc::Sender<TraceEvent>>, approver: Arc<approvals::RunApprover>) -> Result<(Map<String, Value>, Arc<Value>), ApiError> {
    let engine = d.engine();
    d.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
    let t = Instant::now();
    tracing::info!(request_chars = job.request.chars().count(), "run started");
    let result = match &job.work {
        Work::Ask { given, earlier, opts } => {
            let mut opts = opts.clone();
            opts.approver = Some(approver.clone());
            engine.run_with(&job.request, given.clone(), earlier.clone(), sink.as_ref(), opts).await
        }
        Work::Chain { chain, given, opts } => {
            let mut opts = opts.clone();
            opts.approver = Some(approver.clone());
            match engine.execute_chain(&job.request, chain, given.clone(), sink.as_ref(), opts).await {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => {
                    d.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
                    return Err(ApiError::invalid(format!("the chain: {e}")));
                }
                Err(e) => Err(e),
            }
        }
    };
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
    tracing::info!(status, calls = report.stats.http_calls, ms = t.elapsed().as_millis() as u64, "run ended");
    // The graph learns from the run (counts, the answered chain, failing APIs); a failure to
    // learn is logged, never the user's error.
    match engine.learn_from(&job.run_id, &report).await {
        Ok(l) => {
            if l.learned.applied || !l.status_changes.is_empty() {
                d.learned_since_refresh.store(true, Ordering::SeqCst);
            }
        }
        Err(e) => tracing::error!(error = %e, "learning from the run failed"),
    }
    d.metrics.run(status, t.elapsed().as_secs_f64(), report.stats.http_calls as u64, report.stats.failed_calls as u64);
    d.metrics.llm(&report.stats.llm);
    let body = result_body(&job.run_id, &job.session_id, &report);
    let mut stored = body.clone();
    stored.insert("request".into(), json!(job.request));
    stored.insert("trace".into(), json!(report.trace));
    let stored = Arc::new(Value::Object(stored));
    let record = RunRecord {
        id: job.run_id.clone(),
        user_id: job.caller.user_id.clone(),
        session_id: job.session_id.clone(),
        request: job.request.clone(),
        options: job.options.clone(),
        status: status.to_string(),
        tools: {
            let mut seen = HashSet::new();
            report.chain.iter().filter(|c| seen.insert(c.api.clone())).map(|c| c.api.clone()).collect()
        },
        body: (*stored).clone(),
        pending: None,
        lease_until_ms: None,
        // The row exists since the run started; an upsert keeps its creation time.
        created_ms: crate::state::now_ms(),
        finished_ms: Some(crate::state::now_ms()),
        duration_ms: Some(t.elapsed().as_millis() as i64),
    };
    // The run's record and its session's next state in one transaction: the session's next turn
    // sees this one (any replica: the session lives in the state store).
    let keep = d.settings().server.session_turns.max(1);
    d.state
        .finish_run(&record, |st| {
            let mut s = SessionState::of(st);
            let turn = s.turns.last().and_then(|t| t["turn"].as_u64()).unwrap_or(0) as usize + 1;
            s.turns.push(json!({"turn": turn, "run_id": job.run_id, "request": job.request, "status": report.status, "answer": report.answer}));
            // The session keeps its last turns' summaries (every run stays in the history).
            if s.turns.len() > MAX_SESSION_TURNS {
                let extra = s.turns.len() - MAX_SESSION_TURNS;
                s.turns.drain(..extra);
            }
            for (c, resp) in report.chain.iter().zip(&report.responses) {
                s.earlier.push(EarlierRecord { turn, request: job.request.clone(), api: c.api.clone(), response: (**resp).clone() });
            }
            let oldest = turn.saturating_sub(keep) + 1;
            s.earlier.retain(|e| e.turn >= oldest);
            Some(json!(s))
        })
        .await?;
    Ok((body, stored))
}

/// A run the caller may see: their own, or any for an administrator (others' are "not found").
pub(crate) async fn visible_run(d: &Daemon, caller: &Caller, id: &str) -> Result<RunRecord, ApiError> {
    match d.state.run(id).await? {
        Some(r) if r.user_id == caller.user_id || caller.is_admin() => Ok(r),
        _ => Err(ApiError::not_found(format!("no run {id}"))),
    }
}

async fn get_run(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let r = visible_run(&d, &caller, &id).await?;
    Ok(json_response(&run_view(&r)))
}

async fn create_session(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = d.new_id("ses");
    d.state.put_session(&id, &caller.user_id, &json!(SessionState::default())).await?;
    Ok((StatusCode::CREATED, Json(json!({"session_id": id}))))
}

async fn own_session(d: &Daemon, caller: &Caller, id: &str) -> Result<(Value, i64), ApiError> {
    match d.state.session(id).await? {
        Some((owner, st, at)) if owner == caller.user_id => Ok((st, at)),
        _ => Err(ApiError::not_found(format!("no session {id}"))),
    }
}

#[derive(Debug, Default, Deserialize)]
struct SessionsQuery {
    limit: Option<usize>,
}

/// `GET /v1/sessions?limit=`: the caller's conversations, most recently used first, each with its
/// kept turns' count, first request and last status.
async fn list_sessions(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, q: Result<Query<SessionsQuery>, axum::extract::rejection::QueryRejection>) -> Result<Json<Value>, ApiError> {
    let limit = q?.0.limit.unwrap_or(20);
    if limit == 0 || limit > 200 {
        return Err(ApiError::invalid("limit: 1 to 200"));
    }
    let list: Vec<Value> = d
        .state
        .list_sessions(&caller.user_id, limit)
        .await?
        .into_iter()
        .map(|(id, st, at)| {
            let s = SessionState::of(st);
            let first = s.turns.first().and_then(|t| t.get("request")).cloned().unwrap_or(Value::Null);
            let last = s.turns.last().and_then(|t| t.get("status")).cloned().unwrap_or(Value::Null);
            json!({"session_id": id, "updated_ms": at, "turns": s.turns.len(), "title": first, "last_status": last})
        })
        .collect();
    Ok(Json(json!({"sessions": list})))
}

async fn get_session(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let (st, at) = own_session(&d, &caller, &id).await?;
    let s = SessionState::of(st);
    let idle_s = (crate::state::now_ms() - at).max(0) / 1000;
    Ok(Json(json!({"session_id": id, "turns": s.turns, "given": s.given, "idle_s": idle_s})))
}

async fn delete_session(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    own_session(&d, &caller, &id).await?;
    d.state.delete_session(&id).await?;
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

async fn cypher(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, ApiJson(body): ApiJson<CypherRequest>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "Cypher")?;
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
