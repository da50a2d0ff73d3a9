//! Configuration structs. Loading (defaults → file → `TOOLGRAPH__*` env → CLI) lives in the engine.
//! Secrets are never part of these structs: they come from the environment or a secret file.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub store: StoreSettings,
    pub weights: WeightSettings,
    pub ingest: IngestSettings,
    pub embed: EmbedSettings,
    pub vectors: VectorSettings,
    pub retrieval: RetrievalSettings,
    #[serde(default)]
    pub run: RunSettings,
    #[serde(default)]
    pub exec: ExecSettings,
    #[serde(default)]
    pub server: ServerSettings,
    #[serde(default)]
    pub health: HealthSettings,
    #[serde(default)]
    pub llm: LlmConfig,
    #[serde(default)]
    pub state: StateSettings,
}

/// The daemon's durable state (`[state]`): users, keys, sessions, runs, saved chains, credentials,
/// approvals, audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StateSettings {
    /// `sqlite:PATH` (embedded default) or `postgres://USER@HOST:PORT/DB` (the password from
    /// `TOOLGRAPH_STATE_PASSWORD(_FILE)`, never here).
    pub url: String,
    pub max_connections: u32,
    /// Finished runs older than this are deleted, and sessions idle this long (0: kept).
    pub retention_days: u64,
    /// At most this many runs are kept, newest first (0: no limit).
    pub retention_runs: u64,
    /// Audit entries older than this are deleted (0: kept).
    pub audit_days: u64,
    /// How often retention runs, seconds.
    pub retention_every_s: u64,
    /// PostgreSQL: run and session records wait for the WAL flush. Off by default: a PostgreSQL
    /// crash may then lose the last fraction of a second of run history (keys, credentials and
    /// approval decisions always wait).
    pub synchronous_runs: bool,
}

impl Default for StateSettings {
    fn default() -> Self {
        StateSettings {
            url: "sqlite:.tgdata/state.db".into(),
            max_connections: 8,
            retention_days: 90,
            retention_runs: 100_000,
            audit_days: 365,
            retention_every_s: 3600,
            synchronous_runs: false,
        }
    }
}

/// The LLMs a deployment can use (`[llm]`, `[llm.models.NAME]`): any OpenAI-compatible endpoint.
/// Requests pick one by name (`model`), else `default`. Keys never live here: each model names
/// the environment variable or the file its key is read from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LlmConfig {
    pub default: String,
    /// Named models (names are lower-case: config keys are case-insensitive).
    pub models: std::collections::BTreeMap<String, ModelSettings>,
}

impl Default for LlmConfig {
    fn default() -> Self {
        let mut models = std::collections::BTreeMap::new();
        models.insert("local".to_string(), ModelSettings::default());
        LlmConfig { default: "local".into(), models }
    }
}

/// One OpenAI-compatible model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelSettings {
    /// Base URL, e.g. `http://127.0.0.1:8080/v1` or `https://api.openai.com/v1`.
    pub base_url: String,
    /// The model name the endpoint expects.
    pub model: String,
    /// Environment variable holding the API key (empty: none).
    pub api_key_env: String,
    /// File holding the API key (read when the variable is unset; empty: none).
    pub api_key_file: String,
    pub temperature: f64,
    /// Nucleus sampling; unset: the endpoint's default.
    pub top_p: Option<f64>,
    pub max_tokens: u32,
    pub timeout_ms: u64,
    /// Retries after the first attempt for transient failures.
    pub retries: u32,
    /// What the model decides: `open` (default) — only what the graph, the learned filler and the
    /// rules leave open (a close choice among candidates, arguments no rule fills, plan mode's
    /// program), one short prompt each; `all` — every decision (decomposition, each choice and
    /// fill, the judge, the answer), for models that plan well and are fast; `unsure` — only
    /// where the reading of the request is unsure (which of 2–3 remembered chains to replay,
    /// which of 2–3 mentions plays which remembered role), one completion each at most.
    pub decides: String,
    /// Completions one run may ask of this model (re-asks included); past it the run's remaining
    /// decisions are the deterministic planner's. 0: no limit.
    pub max_calls_per_run: u32,
}

impl Default for ModelSettings {
    fn default() -> Self {
        ModelSettings {
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "local".into(),
            api_key_env: "TOOLGRAPH_LLM_API_KEY".into(),
            api_key_file: String::new(),
            temperature: 0.0,
            top_p: None,
            max_tokens: 512,
            timeout_ms: 60_000,
            retries: 2,
            decides: "open".into(),
            max_calls_per_run: 12,
        }
    }
}

/// When an API that keeps failing leaves search, and how it comes back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HealthSettings {
    /// Track API health at all (the daemon's runs; off: every API stays as it is).
    pub enabled: bool,
    /// This many failed calls in a row mark an API `degraded`.
    pub consecutive_failures: u32,
    /// …or its availability over the last `window` calls falls below `min_availability`
    /// (once the window is full).
    pub window: usize,
    pub min_availability: f64,
    /// How often degraded APIs are probed with their recorded example call.
    pub probe_every_ms: u64,
    /// After this many failed probes in a row a degraded API becomes `invalid` (0: never).
    pub invalid_after_probes: u32,
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            enabled: true,
            consecutive_failures: 5,
            window: 20,
            min_availability: 0.2,
            probe_every_ms: 60_000,
            invalid_after_probes: 60,
        }
    }
}

/// Where API vectors and long-term memories live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorSettings {
    /// `embedded:FOLDER` (Qdrant's in-process engine) or `qdrant:http://HOST:6334` (a Qdrant
    /// server over gRPC; the API key comes from `TOOLGRAPH_QDRANT_API_KEY` or the file named by
    /// `TOOLGRAPH_QDRANT_API_KEY_FILE`).
    pub uri: String,
    /// Collection names on a Qdrant server are `PREFIX_apis`, `PREFIX_memory`.
    pub collection_prefix: String,
    /// HNSW beam width at search time (recall against exact search rises with it).
    pub hnsw_ef: usize,
    /// Time limit of one request to a Qdrant server, milliseconds.
    pub timeout_ms: u64,
}

/// Seed-tool retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievalSettings {
    /// Candidates each of the lexical and dense lists contributes before fusion.
    pub candidates: usize,
    /// Share of the (max-normalized) BM25 score in the fused score; the rest is dense.
    pub lexical_weight: f32,
    /// Strength of the graph prior (availability and co-usage with chosen tools); 0 turns it off.
    pub graph_prior: f32,
    /// Texts per embedding-and-write chunk while indexing.
    pub index_chunk: usize,
    /// Sibling boost: each fused candidate gains this share of the best fused score of its tool
    /// (requests often need several APIs of one tool); 0 turns it off.
    #[serde(default)]
    pub tool_boost: f32,
    /// Usage vectors (Tool2Vec-style: the mean embedding of the requests whose answered chains
    /// used an API): a hybrid candidate gains this × its max-normalized usage similarity; 0 off.
    #[serde(default)]
    pub usage_weight: f32,
}

/// The sentence-embedding model (fastembed over ONNX Runtime, files on local disk).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbedSettings {
    /// Folder with model.onnx, tokenizer.json, config.json, special_tokens_map.json, tokenizer_config.json.
    pub model_dir: String,
    /// Path to libonnxruntime.so.
    pub ort_library: String,
    /// Texts per inference batch.
    pub batch_size: usize,
    /// ONNX Runtime intra-op threads.
    pub threads: usize,
    /// Longest input in tokens.
    pub max_length: usize,
    /// Embedding cache (redb) keyed by model and text; empty turns it off.
    pub cache: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreSettings {
    /// `embedded:PATH`, `neo4j://HOST:PORT` or `falkordb://HOST:PORT`.
    pub uri: String,
    /// Graph name on FalkorDB.
    pub graph: String,
    /// Database name on Neo4j.
    pub neo4j_database: String,
    /// Neo4j user; the password comes from `TOOLGRAPH_NEO4J_PASSWORD` or the file named by
    /// `TOOLGRAPH_NEO4J_PASSWORD_FILE`.
    pub neo4j_user: String,
    /// Rows per write batch on the Cypher servers.
    pub batch_rows: usize,
    /// Time limit of one read-only Cypher query, milliseconds.
    pub query_timeout_ms: u64,
    /// Row limit of one read-only Cypher query.
    pub query_max_rows: usize,
    /// Byte limit of one read-only Cypher query's result (its rows as JSON).
    #[serde(default = "default_query_max_bytes")]
    pub query_max_bytes: usize,
    /// Read-only Cypher queries of users that may run at once; one the server goes on computing
    /// past its time limit keeps its place until the server stops it (FalkorDB notices its
    /// timeout late), so users' queries never hold more than this many of the server's threads.
    #[serde(default = "default_query_max_running")]
    pub query_max_running: usize,
}

fn default_query_max_running() -> usize {
    1
}

fn default_query_max_bytes() -> usize {
    4 << 20
}

/// Dynamic-weight parameters (thesis §3.5.2): f(x) = αx+1 for x ≥ 0, e^{αx} for x < 0;
/// w = β·w0 + (1-β)·f(s_j)/Σ f(s_k).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WeightSettings {
    pub alpha: f64,
    pub beta: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestSettings {
    /// Trajectories per store write batch.
    pub batch_size: usize,
    /// Largest record (a JSONL line or a whole JSON file) accepted, bytes.
    pub max_record_bytes: u64,
    /// Errors kept in the report (all are counted).
    pub max_reported_errors: usize,
}

/// Execution limits and where calls really go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecSettings {
    /// Time limit of one attempt, milliseconds.
    pub timeout_ms: u64,
    /// Retries after the first attempt for transient failures (timeouts, connection errors, 5xx,
    /// 429, malformed JSON).
    pub retries: u32,
    /// First backoff, doubled per retry, milliseconds.
    pub backoff_ms: u64,
    /// Longest `Retry-After` honoured, milliseconds (longer ones are capped).
    pub max_retry_after_ms: u64,
    /// Largest response body read, bytes.
    pub max_response_bytes: usize,
    /// URL prefix rewrites `[from, to]` (e.g. a RapidAPI host to the replay sandbox).
    pub rewrites: Vec<(String, String)>,
    /// Non-public networks tool calls may reach anyway (`127.0.0.1/32`, `10.0.0.0/8`); every other
    /// loopback, private, link-local … address is refused (SSRF guard, see `toolgraph_engine::exec::guard`).
    #[serde(default)]
    pub allow_private: Vec<String>,
}

impl Default for ExecSettings {
    fn default() -> Self {
        ExecSettings {
            timeout_ms: 10_000,
            retries: 3,
            backoff_ms: 200,
            max_retry_after_ms: 10_000,
            max_response_bytes: 1 << 20,
            rewrites: Vec::new(),
            allow_private: Vec::new(),
        }
    }
}

/// The daemon (`toolgraph serve`). API keys are never here: they come from `TOOLGRAPH_API_KEYS`
/// (comma-separated) or the file named by `TOOLGRAPH_API_KEYS_FILE` (one per line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    /// Without API keys the daemon only starts on a loopback address unless this is true.
    pub allow_anonymous: bool,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Longest request text, characters.
    pub max_request_chars: usize,
    /// Time limit of one HTTP request (a streamed run: until its headers), milliseconds.
    pub request_timeout_ms: u64,
    /// A request's head must arrive within this time of the server waiting for it (a new
    /// connection, or a keep-alive one after its last answer), else the connection is closed: it
    /// bounds slow headers and idle keep-alive connections alike. Milliseconds.
    pub header_read_timeout_ms: u64,
    /// The same limit for a connection accepted while a quarter of `max_connections` or less is
    /// free, so slots cycle under a flood of idle clients. Milliseconds.
    pub header_read_timeout_busy_ms: u64,
    /// A request's body must arrive within this time of its head, milliseconds.
    pub body_read_timeout_ms: u64,
    /// An answer the client does not read: a write that cannot go on for this long closes the
    /// connection (a slow reader that keeps reading is never cut). Milliseconds.
    #[serde(default = "default_write_timeout_ms")]
    pub write_timeout_ms: u64,
    /// Connections served at once; one more is closed as soon as it is accepted. Lowered to the
    /// process's open-file limit less 64 when that is smaller.
    pub max_connections: usize,
    /// Connections one client address may hold at once (0: no cap of its own); one more is closed
    /// as soon as it is accepted, so one client's churn cannot take every slot. Behind a reverse
    /// proxy every connection comes from the proxy: raise it to `max_connections` there.
    #[serde(default = "default_max_connections_per_peer")]
    pub max_connections_per_peer: usize,
    /// A listener of its own for `/healthz`, `/readyz` and `/metrics` only (`serve --ops-port`;
    /// none by default): probes and scrapes are answered there whatever clients do to the main
    /// port. Bind it where only they reach it.
    #[serde(default)]
    pub ops_port: Option<u16>,
    /// The address of that listener (empty: `host`).
    #[serde(default)]
    pub ops_host: String,
    /// Runs executing at once; beyond that, 503 with Retry-After.
    pub max_in_flight: usize,
    /// Runs one user (or the anonymous caller) may have executing at once, so one user cannot
    /// take every slot of `max_in_flight`; beyond that, 429 `too_many_runs` with Retry-After.
    #[serde(default = "default_max_in_flight_per_user")]
    pub max_in_flight_per_user: usize,
    /// Per API key (or client address without keys): sustained requests per second and burst.
    pub rate_per_s: f64,
    pub rate_burst: f64,
    /// How long a run waits for a person to approve a call before it counts as rejected, seconds.
    pub approval_timeout_s: u64,
    /// A paused run's lease: a daemon holding one renews it; when it lapses (the daemon went away)
    /// another daemon of the deployment resumes the run. Milliseconds.
    pub approval_lease_ms: u64,
    /// Runs one user may have paused for approval at once; a run that would pause beyond it is
    /// refused that call at once (the branch fails, as if rejected), so parked runs stay bounded.
    #[serde(default = "default_max_parked_per_user")]
    pub max_parked_per_user: usize,
    /// Turns of a session carried into the next run's context.
    pub session_turns: usize,
    /// How long shutdown waits for in-flight runs, seconds.
    pub shutdown_grace_s: u64,
    /// Retry-After sent with 503 (busy) answers, seconds.
    pub retry_after_s: u64,
    /// How long a console login (cookie session) lasts, hours.
    pub console_login_hours: u64,
    /// The console's login cookie is always `Secure` (behind a TLS terminator that sends no
    /// `X-Forwarded-Proto`); off: `Secure` when `X-Forwarded-Proto: https` says TLS was used.
    #[serde(default)]
    pub console_cookie_secure: bool,
    /// `Host` headers `/mcp` accepts (DNS-rebinding guard): loopback names and `server.host`
    /// always; add the names clients use behind a proxy; `*` turns the check off.
    #[serde(default)]
    pub mcp_allowed_hosts: Vec<String>,
    /// MCP sessions one user may hold open on `/mcp`: opening one more closes that user's oldest
    /// (never another user's). The daemon holds at most 10,000 in all; past that a user without
    /// a session of their own to give up is answered 503 with Retry-After.
    #[serde(default = "default_mcp_sessions_per_user")]
    pub mcp_sessions_per_user: usize,
    /// Event streams (SSE answers on `/mcp`) one user may hold open at once; beyond, 429
    /// `too_many_streams` with Retry-After.
    #[serde(default = "default_mcp_streams_per_user")]
    pub mcp_streams_per_user: usize,
    /// The environment variables a tool credential's `from_env` may name: those starting with
    /// this prefix (never the daemon's own secrets; an empty prefix, or one of them, is refused
    /// at start).
    #[serde(default = "default_credential_env_prefix")]
    pub credential_env_prefix: String,
    /// The folder a tool credential's `from_file` may read from: regular files under it, at most
    /// 64 KiB, links resolved first. Empty (the default): `from_file` is off.
    #[serde(default)]
    pub credential_files_dir: String,
    /// Addresses of the reverse proxies in front of the daemon (exact IPs, e.g. `127.0.0.1`): a
    /// connection from one of them is a client's at the rightmost address of `X-Forwarded-For`
    /// that is not itself a listed proxy (what the login limiter and the audit log key on).
    /// Empty (the default): `X-Forwarded-For` is ignored and the peer address is the client's.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
}

fn default_credential_env_prefix() -> String {
    "TOOLGRAPH_TOOL_".into()
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            host: "127.0.0.1".into(),
            port: 8080,
            allow_anonymous: false,
            max_body_bytes: 1 << 20,
            max_request_chars: 4000,
            request_timeout_ms: 150_000,
            header_read_timeout_ms: 10_000,
            header_read_timeout_busy_ms: 1_000,
            body_read_timeout_ms: 30_000,
            write_timeout_ms: default_write_timeout_ms(),
            max_connections: 256,
            max_connections_per_peer: default_max_connections_per_peer(),
            ops_port: None,
            ops_host: String::new(),
            max_in_flight: 64,
            max_in_flight_per_user: default_max_in_flight_per_user(),
            rate_per_s: 50.0,
            rate_burst: 100.0,
            approval_timeout_s: 86_400,
            approval_lease_ms: 30_000,
            max_parked_per_user: default_max_parked_per_user(),
            session_turns: 5,
            shutdown_grace_s: 30,
            retry_after_s: 1,
            console_login_hours: 12,
            console_cookie_secure: false,
            mcp_allowed_hosts: Vec::new(),
            mcp_sessions_per_user: default_mcp_sessions_per_user(),
            mcp_streams_per_user: default_mcp_streams_per_user(),
            credential_env_prefix: default_credential_env_prefix(),
            credential_files_dir: String::new(),
            trusted_proxies: Vec::new(),
        }
    }
}

/// How candidates are found: the full engine, or the baselines it is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Graph successors filled up from the retriever, depth-first with backtracking.
    Graph,
    /// Depth-first with backtracking, successors from retrieval only (DFSDT-like).
    DfsNoGraph,
    /// Top-k retrieval then greedy calls, no graph, no backtracking (ReAct-like).
    RetrieveGreedy,
    /// A whole plan at once from the solution library (SoAy), executed; a failing step falls
    /// back to the graph search from that step.
    Plan,
}

impl Mode {
    /// Every mode, in the order lists show them (CLI help, the HTTP API's schema, MCP).
    pub const ALL: [Mode; 4] = [Mode::Graph, Mode::Plan, Mode::DfsNoGraph, Mode::RetrieveGreedy];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Graph => "graph",
            Mode::DfsNoGraph => "dfs-no-graph",
            Mode::RetrieveGreedy => "retrieve-greedy",
            Mode::Plan => "plan",
        }
    }

    /// The names of [`Mode::ALL`].
    pub fn names() -> [&'static str; 4] {
        Mode::ALL.map(Mode::name)
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    /// A mode by its name; the error names the input (at most 40 characters) and every mode.
    fn from_str(s: &str) -> Result<Self, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("`{}` is not {}", s.chars().take(40).collect::<String>(), one_of(&Mode::names())))
    }
}

/// Who decides a run: the deterministic planner or a configured OpenAI-compatible LLM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlannerKind {
    #[default]
    Deterministic,
    Llm,
}

impl PlannerKind {
    /// Every planner kind, in the order lists show them.
    pub const ALL: [PlannerKind; 2] = [PlannerKind::Deterministic, PlannerKind::Llm];

    pub fn name(self) -> &'static str {
        match self {
            PlannerKind::Deterministic => "deterministic",
            PlannerKind::Llm => "llm",
        }
    }

    /// The names of [`PlannerKind::ALL`].
    pub fn names() -> [&'static str; 2] {
        PlannerKind::ALL.map(PlannerKind::name)
    }
}

impl std::str::FromStr for PlannerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        PlannerKind::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            format!(
                "planner `{}` is not {}",
                s.chars().take(40).collect::<String>(),
                one_of(&PlannerKind::names().map(|n| format!("`{n}`")).iter().map(String::as_str).collect::<Vec<_>>())
            )
        })
    }
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Budgets and switches of a run (`[run]` in the config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunSettings {
    pub mode: Mode,
    /// K: successors offered at a node.
    pub top_k: usize,
    /// Seed tools retrieved per (sub)task.
    pub seeds: usize,
    /// Also retrieve for each subtask (more recall, one more embedding and search per subtask).
    pub retrieve_subtasks: bool,
    /// Retriever candidates below this similarity (max-normalized) are not offered.
    pub min_similarity: f64,
    pub max_depth: usize,
    /// Calls attempted (successful or not).
    pub max_calls: usize,
    /// Calls that may fail (after the executor's retries) before the run stops searching and
    /// answers with what it has: every failed guess costs the user a request, quota and time, and
    /// an API that acts may act on a wrong guess.
    #[serde(default = "default_max_failed_calls")]
    pub max_failed_calls: usize,
    pub max_planner_calls: usize,
    /// The run's time for everything but the LLM: tool calls, retrieval, the engine itself.
    pub wall_ms: u64,
    /// The run's time for LLM completions, counted apart from `wall_ms` (a slow local model does
    /// not eat the tools' time, nor tools the model's); each completion's own limit is the
    /// model's `timeout_ms`.
    pub llm_wall_ms: u64,
    pub reflection_rounds: usize,
    pub use_memory: bool,
    /// Similarity of meaning (the cosine of the two requests' embeddings with every place, date,
    /// time and number masked) from which a recalled memory is replayed by analogy (1: off).
    pub memory_threshold: f32,
    /// Memories recalled as hints for the search (their chains' steps get a vote).
    pub memory_hints: usize,
    /// Cosine similarity from which a recalled memory votes.
    pub hint_threshold: f32,
    /// Store judged-good runs in long-term memory (the chains recalled for similar requests).
    pub remember: bool,
    /// Fill arguments with the argument model — learned at ingest from the recorded trajectories
    /// and from every run learned from since (`learn`), stored with the graph: which request
    /// mention a parameter takes, ordering words, constants — before the rules; off: the rules
    /// alone.
    pub learned_arguments: bool,
    /// Learn from each run's outcome in the graph: calls and successes per API, the NEXT counts of
    /// answered chains, the judgement's score changes (dynamic weights), the usage vectors of
    /// retrieval and the argument model (what a run judged complete sent each parameter), all in
    /// one write with the run's ledger key. (API health is tracked whatever this says.)
    pub learn: bool,
    /// Observations longer than this are compressed for the planner.
    pub observation_chars: usize,
    /// Reverse Chain: how deep provider calls may nest to fill missing arguments.
    pub reverse_depth: usize,
    /// Target-first planning: call the API that produces what the request asks for first and
    /// complete its arguments backwards (Reverse Chain), then search on.
    pub backward: bool,
    /// Search each subtask of a decomposed request on its own (its own seeds, its own search), the
    /// path shared so later subtasks can use earlier outputs.
    pub per_subtask: bool,
    /// Plan mode: solutions have at most this many APIs.
    pub plan_max_steps: usize,
    /// Plan mode: how many solutions are offered to the planner.
    pub plan_solutions: usize,
    /// The day the engine takes as today where a request does not say it (`YYYY-MM-DD`; empty:
    /// the system clock's). Tests and reproducible evaluations fix it.
    pub today: String,
    /// A lexicon table (TOML) for the reader's language, read once at start; empty: English.
    pub lexicon: String,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            mode: Mode::Graph,
            top_k: 5,
            seeds: 10,
            retrieve_subtasks: false,
            min_similarity: 0.5,
            max_depth: 10,
            max_calls: 30,
            max_failed_calls: default_max_failed_calls(),
            max_planner_calls: 200,
            wall_ms: 120_000,
            llm_wall_ms: 600_000,
            reflection_rounds: 2,
            use_memory: true,
            memory_threshold: 0.6,
            memory_hints: 3,
            hint_threshold: 0.6,
            remember: true,
            learned_arguments: true,
            learn: true,
            observation_chars: 1024,
            reverse_depth: 3,
            backward: false,
            per_subtask: true,
            plan_max_steps: 4,
            plan_solutions: 5,
            today: String::new(),
            lexicon: String::new(),
        }
    }
}

fn default_max_failed_calls() -> usize {
    3
}

fn default_write_timeout_ms() -> u64 {
    30_000
}

fn default_mcp_sessions_per_user() -> usize {
    32
}

fn default_mcp_streams_per_user() -> usize {
    16
}

fn default_max_connections_per_peer() -> usize {
    64
}

fn default_max_parked_per_user() -> usize {
    100
}

fn default_max_in_flight_per_user() -> usize {
    16
}

#[cfg(test)]
mod choice_tests {
    use super::{Mode, PlannerKind};

    #[test]
    fn modes_and_planners_parse_from_their_names_only() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
        assert_eq!(
            "Graph".parse::<Mode>(),
            Err("`Graph` is not graph, plan, dfs-no-graph or retrieve-greedy".to_string())
        );
        assert_eq!("llm".parse::<PlannerKind>(), Ok(PlannerKind::Llm));
        assert_eq!("gpt".parse::<PlannerKind>(), Err("planner `gpt` is not `deterministic` or `llm`".to_string()));
        // The config spells them as the API does.
        assert_eq!(serde_json::to_value(Mode::DfsNoGraph).unwrap(), serde_json::json!("dfs-no-graph"));
    }
}
