//! The daemon's shared state ([`Daemon`]): the engine in use, the stores, the limits, the
//! metrics and the runs in flight; every handler reads it through `State<Arc<Daemon>>`.

use super::error::ApiError;
use super::limits::{ApiKeys, LoginBackoff, RateLimiter};
use super::metrics::Metrics;
use crate::state::{Caller, StateStore};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::plan::models::Models;
use toolgraph_engine::run::Engine;
use toolgraph_engine::run::Health;
use toolgraph_engine::stack::Stack;
use toolgraph_schema::Settings;

/// How long an aborted run gets to let go of what it holds.
pub(super) const ABANDON_WAIT: Duration = Duration::from_secs(5);

/// The daemon's shared state.
pub struct Daemon {
    pub(super) stack: Stack,
    queries: Arc<dyn Embedder>,
    pub(super) engine: RwLock<Arc<Engine>>,
    /// Serializes registrations, invalidations and imports (each re-indexes and reloads).
    pub(super) admin: tokio::sync::Mutex<()>,
    /// Durable state: users, keys, sessions, runs, chains, credentials, approvals, audit.
    pub state: Arc<StateStore>,
    /// Seals tool credentials at rest (`TOOLGRAPH_SECRET_KEY(_FILE)`); without it credentials can
    /// only be referenced (`env:` / `file:`).
    pub(super) sealing: Option<crate::state::secrets::SealingKey>,
    /// Where a credential's `from_env` / `from_file` may point.
    pub(super) references: crate::state::secrets::References,
    /// APIs whose calls wait for a person's approval.
    pub(super) approval_apis: RwLock<Arc<HashSet<String>>>,
    /// Runs paused for approval on this daemon: per user, how many; per run, what wakes it when
    /// a decision is taken here (decisions taken on another daemon are read at each lease renewal).
    pub(super) parked: Mutex<HashMap<String, usize>>,
    pub(super) wakers: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// Key digest → caller (or `None`: not a valid key), with when it was looked up.
    pub(super) key_cache: Mutex<HashMap<String, (Option<Caller>, Instant)>>,
    /// Keys are required: bootstrap keys are configured or users have keys.
    pub(super) auth_required: AtomicBool,
    /// (count, newest change) of the stored credentials the executor holds.
    credentials_version: Mutex<(i64, i64)>,
    /// Runs this daemon is executing now (a paused run it holds is not resumed twice).
    pub(super) active_runs: Mutex<HashSet<String>>,
    /// Their tasks: what shutdown stops (paused runs are handed to the other replicas).
    pub(super) run_tasks: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    pub(super) keys: ApiKeys,
    pub(super) limiter: RateLimiter,
    /// Console login attempts, per address and per name: 10 at once, then one every 6 s.
    pub(super) login_limiter: RateLimiter,
    /// Failed logins per name in a row: doubling waits past ten.
    pub(super) login_backoff: LoginBackoff,
    /// Failed API-key authentications per peer address, in a row (key guessing).
    pub(super) key_backoff: LoginBackoff,
    pub(super) in_flight: Arc<Semaphore>,
    /// Each user's share of the in-flight slots (`server.max_in_flight_per_user` each).
    user_in_flight: Mutex<HashMap<String, Arc<Semaphore>>>,
    pub metrics: Metrics,
    pub(super) draining: AtomicBool,
    /// Held while an engine is loaded and swapped in (a registration's reload, the upkeep's
    /// refresh): a slower load never replaces a newer engine with an older graph.
    pub(super) swapping: tokio::sync::Mutex<()>,
    /// Cancelled when the daemon has stopped serving: MCP sessions (each holds the daemon) end.
    pub(super) stopped: tokio_util::sync::CancellationToken,
    ids: AtomicU64,
    id_seed: u64,
    started: Instant,
    /// When the graph store last answered (ms since `started`; 0: never checked).
    graph_ok_at_ms: AtomicU64,
    /// API health across runs (and engine rebuilds).
    pub health: Arc<Health>,
    /// The store's generation the engine's graph and argument model were loaded at (`u64::MAX`:
    /// not read yet); the upkeep reloads when the store's moves.
    pub(super) graph_generation: AtomicU64,
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

impl Daemon {
    pub async fn new(
        stack: Stack,
        state: Option<Arc<StateStore>>,
        keys: ApiKeys,
    ) -> toolgraph_engine::Result<Arc<Self>> {
        let queries: Arc<dyn Embedder> =
            Arc::new(toolgraph_engine::embed::Memoized::new(stack.embedder.clone(), QUERY_CACHE));
        let health = Arc::new(Health::new(stack.settings.health.clone(), &stack.store.node_snapshot().await?));
        let engine = stack.engine_with(queries.clone(), stack.settings.run.clone(), Some(health.clone())).await?;
        let models = match &stack.models {
            Some(m) => m.clone(),
            None => {
                let categories: Vec<String> = engine.graph().categories.values().map(|c| c.name.clone()).collect();
                Arc::new(Models::from_config(&stack.settings.llm, &categories)?)
            }
        };
        let s = &stack.settings.server;
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let state = match state {
            Some(st) => st,
            None => Arc::new(StateStore::memory().await.map_err(|e| toolgraph_engine::EngineError::Config(e.0))?),
        };
        let sealing = crate::state::secrets::SealingKey::from_env().map_err(toolgraph_engine::EngineError::Config)?;
        let references = crate::state::secrets::References::new(&s.credential_env_prefix, &s.credential_files_dir)
            .and_then(|r| {
                let (own, db) = own_files(&stack.settings);
                r.refusing(&own, db.as_deref())
            })
            .map_err(toolgraph_engine::EngineError::Config)?;
        let auth_required =
            !keys.is_empty() || state.has_keys().await.map_err(|e| toolgraph_engine::EngineError::Config(e.0))?;
        #[cfg(feature = "mcp")]
        let mcp = {
            let hub = crate::mcp::McpHub::from_state(&state, Some(stack.executor.clone()))
                .await
                .map_err(toolgraph_engine::EngineError::Config)?;
            stack.executor.set_remote(hub.clone());
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
            references,
            approval_apis: RwLock::new(Arc::new(HashSet::new())),
            parked: Mutex::new(HashMap::new()),
            wakers: Mutex::new(HashMap::new()),
            key_cache: Mutex::new(HashMap::new()),
            auth_required: AtomicBool::new(auth_required),
            credentials_version: Mutex::new((-1, -1)),
            active_runs: Mutex::new(HashSet::new()),
            run_tasks: Mutex::new(HashMap::new()),
            limiter: RateLimiter::new(s.rate_per_s, s.rate_burst),
            login_limiter: RateLimiter::new(1.0 / 6.0, 10.0),
            login_backoff: LoginBackoff::default(),
            key_backoff: LoginBackoff::default(),
            in_flight: Arc::new(Semaphore::new(s.max_in_flight.max(1))),
            user_in_flight: Mutex::new(HashMap::new()),
            keys,
            metrics: Metrics::default(),
            draining: AtomicBool::new(false),
            stopped: tokio_util::sync::CancellationToken::new(),
            swapping: tokio::sync::Mutex::new(()),
            ids: AtomicU64::new(0),
            id_seed: seed,
            started: Instant::now(),
            graph_ok_at_ms: AtomicU64::new(0),
            health,
            graph_generation: AtomicU64::new(u64::MAX),
            models,
            stack,
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
        let (set, problems) = crate::state::secrets::credential_set(&rows, self.sealing.as_ref(), &self.references);
        for p in problems {
            tracing::error!(credential = %p, "a stored credential cannot be used");
        }
        tracing::info!(credentials = set.len(), "tool credentials loaded");
        self.stack.executor.set_credentials(set);
        Ok(())
    }

    /// A 429 `rate_limited` answer with Retry-After (`wait` seconds), counted in the metrics.
    pub(super) fn rate_limited(&self, message: &str, wait: u64) -> ApiError {
        self.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        ApiError::new(axum::http::StatusCode::TOO_MANY_REQUESTS, "rate_limited", message.to_string())
            .with_retry_after(wait)
    }

    pub(super) fn approval_apis(&self) -> Arc<HashSet<String>> {
        self.approval_apis.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Append to the audit log; a failure is logged, never the caller's error.
    pub(super) async fn audit(&self, who: &Caller, action: &str, target: &str, detail: Value) {
        if let Err(e) = self.state.audit(&who.name, action, target, detail).await {
            tracing::error!(error = %e, action, "audit log");
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.stack.settings
    }

    pub(super) fn engine(&self) -> Arc<Engine> {
        self.engine.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Re-index changed APIs and reload the engine (after a registration or status change).
    pub(super) async fn reload(&self) -> toolgraph_engine::Result<()> {
        let _swap = self.swapping.lock().await;
        let b = &self.stack;
        b.index(false).await?;
        let engine = b.engine_with(self.queries.clone(), b.settings.run.clone(), Some(self.health.clone())).await?;
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(engine);
        Ok(())
    }

    /// Refuse a run early, with a clear 503, when the graph store cannot be reached (a run would
    /// call tools and then fail to learn). A store that answered in the last second is not asked
    /// again; one that was down is asked on every request, so the daemon recovers by itself as
    /// soon as the store is back.
    pub(super) async fn graph_reachable(&self) -> Result<(), ApiError> {
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let last = self.graph_ok_at_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < GRAPH_CHECK_EVERY.as_millis() as u64 {
            return Ok(());
        }
        let store = &self.stack.store;
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
    pub(super) fn new_id(&self, prefix: &str) -> String {
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
    pub(super) fn run_id_for_key(&self, user: &str, api_key: &str, key: &str) -> String {
        use sha2::Digest;
        let d = sha2::Sha256::digest(format!("toolgraph-idempotency\u{0}{user}\u{0}{api_key}\u{0}{key}").as_bytes());
        format!("run_{}", d[..12].iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    /// At the end of shutdown: stop the runs still going (they are paused, or past the grace
    /// period) and release paused runs' leases so that another daemon resumes them at once.
    pub async fn abandon_runs(&self) {
        let tasks: Vec<(String, tokio::task::AbortHandle)> =
            self.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).drain().collect();
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
    /// `user`'s share of the in-flight slots (created on first use; users with nothing in flight
    /// are forgotten once there are many).
    fn user_slots(&self, user: &str) -> Arc<Semaphore> {
        let per_user =
            self.settings().server.max_in_flight_per_user.clamp(1, self.settings().server.max_in_flight.max(1));
        let mut m = self.user_in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() > 10_000 {
            m.retain(|_, s| s.available_permits() < per_user);
        }
        m.entry(user.to_string()).or_insert_with(|| Arc::new(Semaphore::new(per_user))).clone()
    }

    pub fn runs_in_flight(&self) -> u64 {
        self.metrics.in_flight.load(Ordering::Relaxed)
    }
}

/// A run's place among those in flight: one of the daemon's slots and one of its user's.
pub(crate) struct Slot {
    _all: tokio::sync::OwnedSemaphorePermit,
    _own: tokio::sync::OwnedSemaphorePermit,
}

/// A run's place: one of the daemon's in-flight slots, then one of the user's share.
pub(super) fn take_slots(d: &Daemon, user_id: &str) -> Result<Slot, ApiError> {
    let permit = d.in_flight.clone().try_acquire_owned().map_err(|_| {
        d.metrics.busy.fetch_add(1, Ordering::Relaxed);
        ApiError::unavailable(
            "busy",
            format!("{} runs are in flight; retry shortly", d.settings().server.max_in_flight),
            d.settings().server.retry_after_s,
        )
    })?;
    // Then the user's share: one user's runs never take every slot from the others (a full
    // daemon answers `busy` first, whoever asks).
    let own = d.user_slots(user_id).try_acquire_owned().map_err(|_| {
        d.metrics.busy.fetch_add(1, Ordering::Relaxed);
        ApiError::new(
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            "too_many_runs",
            format!(
                "you have {} runs in flight (server.max_in_flight_per_user); retry when one ends",
                d.settings().server.max_in_flight_per_user
            ),
        )
        .with_retry_after(d.settings().server.retry_after_s)
    })?;
    Ok(Slot { _all: permit, _own: own })
}

/// The files the daemon reads for itself besides its `*_FILE` secrets: its configuration
/// (`TOOLGRAPH_CONFIG`), the key files its LLM models name; and its SQLite state database.
fn own_files(settings: &toolgraph_schema::Settings) -> (Vec<std::path::PathBuf>, Option<std::path::PathBuf>) {
    let mut own: Vec<std::path::PathBuf> = std::env::var("TOOLGRAPH_CONFIG").ok().map(Into::into).into_iter().collect();
    own.extend(
        settings.llm.models.values().filter(|m| !m.api_key_file.is_empty()).map(|m| m.api_key_file.clone().into()),
    );
    let url = settings.state.url.trim();
    let db = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .map(|p| p.split('?').next().unwrap_or_default())
        .filter(|p| !p.is_empty() && !p.starts_with(':'))
        .map(std::path::PathBuf::from);
    (own, db)
}
