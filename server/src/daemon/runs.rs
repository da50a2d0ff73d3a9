//! Runs: `/v1/orchestrate`, a run's life (started, streamed, paused, stored, learned from) and
//! `/v1/runs/{id}`.
use super::auth::presented_key;
use super::error::{ApiError, ApiJson};
use super::pause::RunApprover;
use super::sessions::EarlierRecord;
use super::sessions::SessionState;
use super::sessions::MAX_SESSION_GIVEN;
use super::sessions::MAX_SESSION_TURNS;
use super::shared::{take_slots, Daemon};
use crate::state::{Caller, RunRecord};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use toolgraph_engine::plan::Earlier;
use toolgraph_engine::plan::Judgement;
use toolgraph_engine::run::TraceEvent;
use toolgraph_engine::run::{ChainCall, NeedsInput, RunReport, RunStats};
use tracing::Instrument;

/// `POST /v1/orchestrate`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrchestrateRequest {
    /// What to do, in words (at most `server.max_request_chars`, 4,000 by default).
    #[schema(min_length = 1, max_length = 4000)]
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
    #[schema(value_type = Option<PlannerName>)]
    pub planner: Option<String>,
    /// For the llm planner: a configured model name (`GET /v1/models`; default: `llm.default`).
    #[serde(default)]
    pub model: Option<String>,
    /// `graph`, `plan`, `dfs-no-graph` or `retrieve-greedy` (default: `run.mode`).
    #[serde(default)]
    #[schema(value_type = Option<ModeName>)]
    pub mode: Option<String>,
    /// Target-first planning (Reverse Chain) for this run (default: `run.backward`).
    #[serde(default)]
    pub backward: Option<bool>,
    /// Plan only: nothing is sent, learned or remembered; the chain comes back with its data flow.
    #[serde(default)]
    pub dry_run: bool,
}

/// The planners (`toolgraph_schema::PlannerKind`), as a request names them.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)] // describes the names `PlannerKind` parses; a test keeps them equal
pub enum PlannerName {
    Deterministic,
    Llm,
}

/// The search modes (`toolgraph_schema::Mode`), as a request names them.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)] // describes the names `Mode` parses; a test keeps them equal
pub enum ModeName {
    Graph,
    Plan,
    DfsNoGraph,
    RetrieveGreedy,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    AwaitingApproval,
    Answered,
    Partial,
    GaveUp,
    NeedsInput,
    Interrupted,
    Error,
}

impl RunStatus {
    #[cfg_attr(not(test), allow(dead_code))]
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Running,
        RunStatus::AwaitingApproval,
        RunStatus::Answered,
        RunStatus::Partial,
        RunStatus::GaveUp,
        RunStatus::NeedsInput,
        RunStatus::Interrupted,
        RunStatus::Error,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::AwaitingApproval => "awaiting_approval",
            RunStatus::Answered => "answered",
            RunStatus::Partial => "partial",
            RunStatus::GaveUp => "gave_up",
            RunStatus::NeedsInput => "needs_input",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Error => "error",
        }
    }
}

/// A run as the API shows it: a plain answer (with its trace), `GET /v1/runs/{id}`, a paused run
/// (202, with the call it waits on) and the body of a stream's `result` event (without the trace).
/// One type for all of them: the daemon stores a run's body as this type serialized, streams it,
/// and documents it; [`run_view`] adds the record's columns (status, owner, creation, pending call).
/// The fields a finished run always has are present (`null` when empty); the others only when set.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunResult {
    pub run_id: String,
    pub session_id: String,
    pub status: RunStatus,
    /// The request (or, for a chain, what it is for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default)]
    pub answer: Option<String>,
    /// The calls made: API, arguments and what each returned (compressed).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub chain: Option<Vec<ChainCall>>,
    /// When the run needs a value only the user has: which parameter, of which API, and why.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub needs_input: Option<NeedsInput>,
    /// The judge's verdict on the answer.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub judgement: Option<Judgement>,
    /// Counts and timings: calls, planner decisions, LLM calls and tokens, milliseconds.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub stats: Option<RunStats>,
    /// Every step of the search, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub trace: Option<Vec<TraceEvent>>,
    /// While `awaiting_approval`: the call (api, name, arguments, call_key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Value>,
    /// For a run that ended in an error: the error contract's body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<super::error::ErrorBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_ms: Option<i64>,
}

impl RunResult {
    /// Run `run_id` of session `session_id`, as it stands (`status`); nothing else known yet.
    pub fn of(run_id: &str, session_id: &str, status: RunStatus) -> Self {
        RunResult {
            run_id: run_id.to_string(),
            session_id: session_id.to_string(),
            status,
            request: None,
            answer: None,
            chain: None,
            needs_input: None,
            judgement: None,
            stats: None,
            trace: None,
            pending: None,
            error: None,
            user_id: None,
            created_ms: None,
        }
    }

    /// As JSON (what the record stores, the stream sends, the API answers).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

impl From<toolgraph_engine::run::Status> for RunStatus {
    fn from(s: toolgraph_engine::run::Status) -> Self {
        use toolgraph_engine::run::Status;
        match s {
            Status::Answered => RunStatus::Answered,
            Status::Partial => RunStatus::Partial,
            Status::GaveUp => RunStatus::GaveUp,
            Status::NeedsInput => RunStatus::NeedsInput,
        }
    }
}

/// One Server-Sent Event of a streamed run: `run` (its ids), then a `step` per trace event, then
/// `result` (the run without its trace) or `error` (the error contract's body); `data` is JSON.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // the events `start_run` writes; described here
pub struct StreamEvent {
    pub event: StreamEventKind,
    /// The event's JSON.
    pub data: String,
    pub id: Option<String>,
    pub retry: Option<u64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "snake_case")]
pub enum StreamEventKind {
    Run,
    Step,
    Result,
    Error,
}

/// Whose evidence a run's calls are for API health: a named user, or (`None`) the one operator of
/// a daemon without keys.
fn health_caller(user_id: &str) -> Option<&str> {
    (user_id != "local").then_some(user_id)
}

/// The per-run choices of a request, checked.
pub(super) fn run_options(d: &Daemon, r: &OrchestrateRequest) -> Result<toolgraph_engine::run::RunOptions, ApiError> {
    let mode = match r.mode.as_deref().map(str::parse::<toolgraph_engine::run::Mode>) {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => return Err(ApiError::invalid(format!("`mode`: {e}"))),
    };
    let planner = match (r.planner.as_deref(), r.model.as_deref()) {
        (None, None) => None,
        (p, m) => Some(d.models.planner(p.unwrap_or("llm"), m).map_err(|e| {
            ApiError::invalid(format!("`planner`/`model`: {}", e.chars().take(300).collect::<String>()))
        })?),
    };
    let dry_run = r.dry_run;
    Ok(toolgraph_engine::run::RunOptions { planner, mode, backward: r.backward, dry_run, ..Default::default() })
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct StreamQuery {
    /// Stream the run as Server-Sent Events (also `Accept: text/event-stream`).
    #[serde(default)]
    pub(super) stream: Option<bool>,
}

pub(super) const MAX_GIVEN: usize = 50;
pub(super) const MAX_GIVEN_VALUE_CHARS: usize = 4000;

pub(super) fn validate_request(r: &OrchestrateRequest, max_chars: usize) -> Result<(), ApiError> {
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
            return Err(ApiError::invalid(format!(
                "`given.{}`: names are 1..200 characters, values at most {MAX_GIVEN_VALUE_CHARS} characters of JSON",
                k.chars().take(40).collect::<String>()
            )));
        }
    }
    Ok(())
}

/// The answer body: everything but the trace (which streams, or is added for plain answers).
pub(super) fn result_body(run_id: &str, session_id: &str, r: &RunReport) -> RunResult {
    RunResult {
        answer: Some(r.answer.clone()),
        chain: Some(r.chain.clone()),
        needs_input: r.needs_input.clone(),
        judgement: r.judgement.clone(),
        stats: Some(r.stats.clone()),
        ..RunResult::of(run_id, session_id, r.status.into())
    }
}

/// Plan and execute a request.
///
/// The answer is JSON, or Server-Sent Events (events `run`, `step`, `result`, `error`) with
/// `Accept: text/event-stream`, `?stream=true` or `"stream": true`. A run that reaches a call that
/// waits for approval answers 202 and goes on in the background. An `Idempotency-Key` header makes
/// a retried request get the run it already made.
#[utoipa::path(post, path = "/v1/orchestrate", tag = "runs", params(StreamQuery, ("Idempotency-Key" = Option<String>, Header, description = "1 to 200 visible ASCII characters")), request_body = OrchestrateRequest,
    responses((status = 200, description = "the run (JSON), or its stream (SSE)", content((RunResult = "application/json"), (StreamEvent = "text/event-stream"))),
        (status = 202, description = "paused for approval", body = RunResult),
        (status = 404, description = "no such session (`session_id`; it may have expired)", body = super::error::ErrorBody)))]
pub(super) async fn orchestrate(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    q: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>,
    ApiJson(body): ApiJson<OrchestrateRequest>,
) -> Result<Response, ApiError> {
    let q = q?.0;
    validate_request(&body, d.settings().server.max_request_chars)?;
    let opts = run_options(&d, &body)?;
    if d.draining.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable(
            "draining",
            "the daemon is shutting down",
            d.settings().server.retry_after_s,
        ));
    }
    // A retried request (same Idempotency-Key) gets the run it already made: nothing runs, and
    // the graph does not learn from it twice (the run id, derived from the key, is the ledger key).
    let idempotent_id = match headers.get("idempotency-key") {
        None => None,
        Some(v) => {
            let k = v
                .to_str()
                .ok()
                .filter(|k| !k.is_empty() && k.len() <= 200 && k.bytes().all(|b| b.is_ascii_graphic()))
                .ok_or_else(|| ApiError::invalid("Idempotency-Key: 1 to 200 visible ASCII characters"))?;
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
            let (owner, st, _) =
                d.state.session(id).await?.filter(|(owner, _, _)| owner == &caller.user_id).ok_or_else(|| {
                    ApiError::not_found(format!(
                        "no session {id} (it may have expired; start a new one by leaving session_id out)"
                    ))
                })?;
            debug_assert_eq!(owner, caller.user_id);
            (id.clone(), SessionState::of(st))
        }
        None => (d.new_id("ses"), SessionState::default()),
    };
    session.given.extend(body.given.clone());
    if session.given.len() > MAX_SESSION_GIVEN {
        return Err(ApiError::invalid(format!(
            "the session holds more than {MAX_SESSION_GIVEN} given values; start a new session"
        )));
    }
    let run_id = idempotent_id.unwrap_or_else(|| d.new_id("run"));
    let options = json!({"planner": body.planner, "model": body.model, "mode": body.mode, "backward": body.backward, "given": body.given, "dry_run": body.dry_run});
    let work = Work::Ask { given: session.given.clone(), earlier: session.earlier(), opts };
    let job = Job {
        run_id,
        session_id,
        caller,
        request: body.request.clone(),
        options,
        session: Some(json!(session)),
        work,
        resumed: false,
    };
    start_run(d, job, stream).await
}

pub(super) fn wants_stream(body: bool, query: Option<bool>, headers: &HeaderMap) -> bool {
    body || query.unwrap_or(false)
        || headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"))
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
    let slot = take_slots(&d, &job.caller.user_id)?;
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
            .start_run(
                &RunRecord {
                    id: rid.clone(),
                    user_id: job.caller.user_id.clone(),
                    session_id: sid.clone(),
                    request: job.request.clone(),
                    options: job.options.clone(),
                    status: "running".into(),
                    tools: Vec::new(),
                    body: RunResult {
                        request: Some(job.request.clone()),
                        ..RunResult::of(&rid, &sid, RunStatus::Running)
                    }
                    .to_value(),
                    pending: None,
                    // Held by this daemon while it runs (upkeep renews it); lapsed: the run is interrupted.
                    lease_until_ms: Some(now + d.settings().server.approval_lease_ms.max(100) as i64),
                    created_ms: now,
                    finished_ms: None,
                    duration_ms: None,
                },
                job.session.as_ref(),
            )
            .await?;
    }
    let (pause_tx, mut pause_rx) = mpsc::channel::<Value>(4);
    let approver = RunApprover::new(&d, &job.run_id, &job.caller.user_id, pause_tx, slot);
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
        let _ = tx
            .send(Ok(Event::default().event("run").data(json!({"run_id": rid, "session_id": sid}).to_string())))
            .await;
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
            Ok((body, _)) => Event::default().event("result").data(body.to_value().to_string()),
            Err(e) => Event::default().event("error").data(e.body().to_string()),
        };
        let _ = tx.send(Ok(last)).await;
    });
    d.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).insert(task_id, task.abort_handle());
    Ok(Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response())
}

/// A JSON body from a stored value, serialized straight from it (no copy of the trace).
pub(super) fn json_response(v: &Value) -> Response {
    match serde_json::to_vec(v) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// A stored run as the API shows it: its body, with the call it waits on while paused.
pub(super) fn run_view(r: &RunRecord) -> Value {
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
pub(super) async fn execute(
    d: &Daemon,
    job: Job,
    sink: Option<mpsc::Sender<TraceEvent>>,
    approver: Arc<RunApprover>,
) -> Result<(RunResult, Arc<Value>), ApiError> {
    let span = tracing::info_span!("run", run_id = %job.run_id, user = %job.caller.name);
    async move {
        d.active_runs.lock().unwrap_or_else(|p| p.into_inner()).insert(job.run_id.clone());
        let out = execute_inner(d, &job, sink, approver).await;
        d.active_runs.lock().unwrap_or_else(|p| p.into_inner()).remove(&job.run_id);
        d.run_tasks.lock().unwrap_or_else(|p| p.into_inner()).remove(&job.run_id);
        if let Err(e) = &out {
            // The run's record says how it ended, even when it ended in an error.
            let body = RunResult {
                request: Some(job.request.clone()),
                error: Some(e.error_body()),
                ..RunResult::of(&job.run_id, &job.session_id, RunStatus::Error)
            }
            .to_value();
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

pub(super) async fn execute_inner(
    d: &Daemon,
    job: &Job,
    sink: Option<mpsc::Sender<TraceEvent>>,
    approver: Arc<RunApprover>,
) -> Result<(RunResult, Arc<Value>), ApiError> {
    let engine = d.engine();
    d.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
    let t = Instant::now();
    tracing::info!(request_chars = job.request.chars().count(), "run started");
    let result = match &job.work {
        Work::Ask { given, earlier, opts } => {
            let mut opts = opts.clone();
            opts.approver = Some(approver.clone());
            opts.caller = health_caller(&job.caller.user_id).map(str::to_string);
            engine.run_with(&job.request, given.clone(), earlier.clone(), sink.as_ref(), opts).await
        }
        Work::Chain { chain, given, opts } => {
            let mut opts = opts.clone();
            opts.approver = Some(approver.clone());
            opts.caller = health_caller(&job.caller.user_id).map(str::to_string);
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
    // The engine reloads what it learned (and what other daemons learned) on its next refresh.
    if let Err(e) = engine.learn_from_caller(&job.run_id, &report, health_caller(&job.caller.user_id)).await {
        tracing::error!(error = %e, "learning from the run failed");
    }
    d.metrics.run(status, t.elapsed().as_secs_f64(), report.stats.http_calls as u64, report.stats.failed_calls as u64);
    d.metrics.llm(&report.stats.llm);
    let body = result_body(&job.run_id, &job.session_id, &report);
    let stored = Arc::new(
        RunResult { request: Some(job.request.clone()), trace: Some(report.trace.clone()), ..body.clone() }.to_value(),
    );
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

/// A run with its trace (the caller's own; administrators: any); while paused, the pending call.
#[utoipa::path(get, path = "/v1/runs/{id}", tag = "runs", params(("id" = String, Path, description = "the run's id")), responses((status = 200, description = "the run", body = RunResult)))]
pub(super) async fn get_run(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = visible_run(&d, &caller, &id).await?;
    Ok(json_response(&run_view(&r)))
}
