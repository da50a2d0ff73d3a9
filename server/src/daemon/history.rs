//! History and the developer mode: a user's runs (filtered, paged), re-running one, saved chains
//! (templates) and executing a chain a person wrote.

use super::error::{ApiError, ApiJson};
use super::runs::OrchestrateRequest;
use super::runs::{run_options, start_run, visible_run, wants_stream, Job, Work};
use super::sessions::SessionState;
use super::shared::Daemon;
use crate::state::{now_ms, random_id, Caller, RunFilter, RunSummary, SavedChain};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct RunsQuery {
    #[param(inline)]
    status: Option<super::runs::RunStatus>,
    /// Words of the request.
    #[param(max_length = 200)]
    q: Option<String>,
    /// An API id or a prefix (`category/tool`).
    #[param(max_length = 200)]
    tool: Option<String>,
    /// The `next` cursor of the previous page.
    before: Option<String>,
    /// 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<usize>,
    /// Administrators: another user's runs (`*`: everyone's).
    user: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct RunPage {
    runs: Vec<RunSummary>,
    /// The cursor of the next page (`before=`), if there is one.
    next: Option<String>,
}

/// The caller's runs, newest first (administrators: `user=ID` or `user=*`).
#[utoipa::path(get, path = "/v1/runs", tag = "runs", params(RunsQuery), responses((status = 200, description = "a page of runs", body = RunPage)))]
pub(super) async fn list_runs(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<RunsQuery>, QueryRejection>,
) -> Result<Json<RunPage>, ApiError> {
    let q = q?.0;
    for (f, v) in [("q", &q.q), ("tool", &q.tool)] {
        if v.as_ref().is_some_and(|v| v.chars().count() > 200) {
            return Err(ApiError::invalid(format!("{f}: at most 200 characters")));
        }
    }
    let before = match &q.before {
        None => None,
        Some(c) => {
            let (ms, id) =
                c.split_once('_').ok_or_else(|| ApiError::invalid("before: a `next` cursor of an earlier page"))?;
            Some((
                ms.parse::<i64>().map_err(|_| ApiError::invalid("before: a `next` cursor of an earlier page"))?,
                format!("run_{}", id.trim_start_matches("run_")),
            ))
        }
    };
    let user_id = match q.user.as_deref() {
        None => Some(caller.user_id.clone()),
        Some(u) => {
            super::auth::require_admin(&caller, "other users' runs")?;
            (u != "*").then(|| u.to_string())
        }
    };
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > 200 {
        return Err(ApiError::invalid("limit: 1 to 200"));
    }
    let f =
        RunFilter { user_id, status: q.status.map(|s| s.as_str().to_string()), text: q.q, tool: q.tool, before, limit };
    let (runs, next) = d.state.list_runs(&f).await?;
    Ok(Json(RunPage { runs, next }))
}

/// What a stored run's options ask for, to run it again.
pub(super) async fn work_of(d: &Daemon, options: &Value, session_id: &str) -> Result<Work, ApiError> {
    let given: Map<String, Value> = options.get("given").and_then(Value::as_object).cloned().unwrap_or_default();
    if let Some(chain) = options.get("chain") {
        return Ok(Work::Chain { chain: chain.clone(), given, opts: Default::default() });
    }
    let r = OrchestrateRequest {
        request: "-".into(),
        session_id: None,
        given: Map::new(),
        stream: false,
        planner: options.get("planner").and_then(Value::as_str).map(str::to_string),
        model: options.get("model").and_then(Value::as_str).map(str::to_string),
        mode: options.get("mode").and_then(Value::as_str).map(str::to_string),
        backward: options.get("backward").and_then(Value::as_bool),
        dry_run: options.get("dry_run").and_then(Value::as_bool).unwrap_or(false),
    };
    let opts = run_options(d, &r)?;
    // The session's values as they are now (a resumed run continues its conversation).
    let session = d.state.session(session_id).await?.map(|(_, st, _)| SessionState::of(st)).unwrap_or_default();
    let mut all = session.given.clone();
    all.extend(given);
    Ok(Work::Ask { given: all, earlier: session.earlier(), opts })
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct StreamQuery {
    /// Stream the run as Server-Sent Events (also `Accept: text/event-stream`).
    stream: Option<bool>,
}

/// Run the same request (or chain) again with the same choices, in a new session.
///
/// Only the run's owner may re-run it.
#[utoipa::path(post, path = "/v1/runs/{id}/rerun", tag = "runs", params(("id" = String, Path, description = "the run's id"), StreamQuery),
    responses((status = 200, description = "the new run (JSON), or its stream (SSE)", content((super::runs::RunResult = "application/json"), (super::runs::StreamEvent = "text/event-stream"))),
        (status = 202, description = "paused for approval", body = super::runs::RunResult)))]
pub(super) async fn rerun(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Result<Query<StreamQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = q?.0;
    // Only the owner re-runs a run (an administrator's re-run would act as someone else).
    let run = visible_run(&d, &caller, &id).await?;
    if run.user_id != caller.user_id {
        return Err(ApiError::forbidden(format!("run {id} belongs to another user; re-run your own runs")));
    }
    d.graph_reachable().await?;
    let session_id = d.new_id("ses");
    let work = work_of(&d, &run.options, &session_id).await?;
    let mut options = run.options.clone();
    if let Value::Object(m) = &mut options {
        m.insert("rerun_of".into(), json!(id));
    }
    let job = Job {
        run_id: d.new_id("run"),
        session_id,
        caller,
        request: run.request.clone(),
        options,
        session: Some(json!(SessionState::default())),
        work,
        resumed: false,
    };
    start_run(d, job, wants_stream(false, q.stream, &headers)).await
}

const MAX_CHAIN_BYTES: usize = 64 * 1024;

/// A chain as people write it: `{"steps": [{"api", "arguments"?, "for_each"?, "if"?}]}`.
pub(super) fn check_steps(steps: &Value) -> Result<Value, ApiError> {
    let n = steps.as_array().map(Vec::len).unwrap_or(0);
    if n == 0 {
        return Err(ApiError::invalid("steps: a non-empty list of {\"api\", \"arguments\"} objects"));
    }
    if steps.to_string().len() > MAX_CHAIN_BYTES {
        return Err(ApiError::invalid(format!("steps: at most {MAX_CHAIN_BYTES} bytes of JSON")));
    }
    Ok(json!({"steps": steps}))
}

/// One step of a chain as people write it.
#[derive(Deserialize, utoipa::ToSchema)]
#[allow(dead_code)] // the shape the engine's chain check reads from JSON; described here
pub(super) struct Step {
    /// The API's id (`category/tool/api`).
    api: String,
    /// Its arguments; a value may be a `$varN.field$` reference to an earlier step's output.
    arguments: Option<Map<String, Value>>,
    /// Call once per element of this list (a `$varN.field$` reference).
    for_each: Option<String>,
    /// Call only when this condition on earlier outputs holds.
    #[serde(rename = "if")]
    condition: Option<Value>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecuteChain {
    /// The steps, or …
    #[serde(default)]
    #[schema(value_type = Option<Vec<Step>>)]
    steps: Option<Value>,
    /// … a saved chain's id.
    #[serde(default)]
    chain_id: Option<String>,
    /// What the chain is for (the run's request text; default: the saved chain's name or the APIs).
    #[serde(default)]
    request: Option<String>,
    #[serde(default)]
    given: Map<String, Value>,
    #[serde(default)]
    stream: bool,
}

/// Execute a chain as written (developer mode), or a saved chain by `chain_id`.
///
/// Every step is checked like a planned call — known, usable API; argument names and types
/// against its schema; `$varN.field$` references only to earlier steps — before anything is sent.
#[utoipa::path(post, path = "/v1/chains/execute", tag = "chains", params(StreamQuery), request_body = ExecuteChain,
    responses((status = 200, description = "the run (JSON), or its stream (SSE)", content((super::runs::RunResult = "application/json"), (super::runs::StreamEvent = "text/event-stream"))),
        (status = 202, description = "paused for approval", body = super::runs::RunResult),
        (status = 404, description = "no saved chain `chain_id`", body = super::error::ErrorBody),
        (status = 422, description = "the chain is invalid (`invalid_chain`)", body = super::error::ErrorBody)))]
pub(super) async fn execute_chain(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    q: Result<Query<StreamQuery>, QueryRejection>,
    ApiJson(body): ApiJson<ExecuteChain>,
) -> Result<Response, ApiError> {
    let q = q?.0;
    let (chain, name) = match (&body.steps, &body.chain_id) {
        (Some(s), None) => (check_steps(s)?, None),
        (None, Some(id)) => {
            let c = own_chain(&d, &caller, id).await?;
            (check_steps(&c.steps)?, Some(c.name))
        }
        _ => return Err(ApiError::invalid("give either `steps` or `chain_id`")),
    };
    super::runs::validate_request(
        &OrchestrateRequest {
            request: "chain".into(),
            session_id: None,
            given: body.given.clone(),
            stream: false,
            planner: None,
            model: None,
            mode: None,
            backward: None,
            dry_run: false,
        },
        usize::MAX,
    )?;
    let request = body.request.clone().or(name).unwrap_or_else(|| {
        let apis: Vec<&str> = chain["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("api").and_then(Value::as_str))
            .collect();
        format!("chain: {}", apis.join(" → "))
    });
    if request.trim().is_empty() || request.chars().count() > d.settings().server.max_request_chars {
        return Err(ApiError::invalid(format!("request: 1 to {} characters", d.settings().server.max_request_chars)));
    }
    d.engine().check_chain(&request, &chain).map_err(|e| ApiError::unprocessable("invalid_chain", e))?;
    d.graph_reachable().await?;
    let session_id = d.new_id("ses");
    let options = json!({"chain": chain, "given": body.given});
    let job = Job {
        run_id: d.new_id("run"),
        session_id,
        caller,
        request,
        options,
        session: Some(json!(SessionState::default())),
        work: Work::Chain { chain, given: body.given, opts: Default::default() },
        resumed: false,
    };
    start_run(d, job, wants_stream(body.stream, q.stream, &headers)).await
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SaveChain {
    #[schema(min_length = 1, max_length = 200)]
    name: String,
    #[serde(default)]
    #[schema(max_length = 2000)]
    description: String,
    #[schema(value_type = Vec<Step>, min_items = 1)]
    steps: Value,
    /// Update this saved chain instead of adding one.
    #[serde(default)]
    chain_id: Option<String>,
}

/// Save a chain as a template (checked like an execution first); `chain_id` updates one.
#[utoipa::path(post, path = "/v1/chains", tag = "chains", request_body = SaveChain,
    responses((status = 201, description = "saved", body = SavedChain), (status = 200, description = "updated", body = SavedChain),
        (status = 404, description = "no saved chain `chain_id` of the caller's", body = super::error::ErrorBody),
        (status = 422, description = "the chain is invalid (`invalid_chain`)", body = super::error::ErrorBody)))]
pub(super) async fn save_chain(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<SaveChain>,
) -> Result<(StatusCode, Json<SavedChain>), ApiError> {
    if body.name.trim().is_empty() || body.name.chars().count() > 200 || body.description.chars().count() > 2000 {
        return Err(ApiError::invalid("name: 1 to 200 characters; description: at most 2000"));
    }
    let chain = check_steps(&body.steps)?;
    d.engine().check_chain(&body.name, &chain).map_err(|e| ApiError::unprocessable("invalid_chain", e))?;
    let now = now_ms();
    let (id, created) = match &body.chain_id {
        Some(id) => (id.clone(), own_chain(&d, &caller, id).await?.created_ms),
        None => (random_id("chn", 8), now),
    };
    let c = SavedChain {
        chain_id: id,
        user_id: caller.user_id.clone(),
        name: body.name.trim().into(),
        description: body.description,
        steps: body.steps,
        created_ms: created,
        updated_ms: now,
    };
    d.state.put_chain(&c).await?;
    Ok((if body.chain_id.is_some() { StatusCode::OK } else { StatusCode::CREATED }, Json(c)))
}

async fn own_chain(d: &Daemon, caller: &Caller, id: &str) -> Result<SavedChain, ApiError> {
    match d.state.chain(id).await? {
        Some(c) if c.user_id == caller.user_id => Ok(c),
        _ => Err(ApiError::not_found(format!("no saved chain {id}"))),
    }
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct ChainsQuery {
    /// Words of the name or description.
    #[param(max_length = 200)]
    q: Option<String>,
    /// At most this many (1 to 200, default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<usize>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Chains {
    chains: Vec<SavedChain>,
}

/// The caller's saved chains.
#[utoipa::path(get, path = "/v1/chains", tag = "chains", params(ChainsQuery), responses((status = 200, description = "the saved chains", body = Chains)))]
pub(super) async fn list_chains(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<ChainsQuery>, QueryRejection>,
) -> Result<Json<Chains>, ApiError> {
    let q = q?.0;
    if q.q.as_ref().is_some_and(|s| s.chars().count() > 200) {
        return Err(ApiError::invalid("q: at most 200 characters"));
    }
    let limit = q.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::invalid("limit: 1 to 200"));
    }
    let chains = d.state.chains(&caller.user_id, q.q.as_deref(), limit).await?;
    Ok(Json(Chains { chains }))
}

/// A saved chain (the caller's own).
#[utoipa::path(get, path = "/v1/chains/{id}", tag = "chains", params(("id" = String, Path, description = "the chain's id")), responses((status = 200, description = "the chain", body = SavedChain)))]
pub(super) async fn get_chain(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<SavedChain>, ApiError> {
    Ok(Json(own_chain(&d, &caller, &id).await?))
}

/// Delete a saved chain.
#[utoipa::path(delete, path = "/v1/chains/{id}", tag = "chains", params(("id" = String, Path, description = "the chain's id")), responses((status = 204, description = "deleted")))]
pub(super) async fn delete_chain(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    own_chain(&d, &caller, &id).await?;
    d.state.delete_chain(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
