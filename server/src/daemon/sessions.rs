//! Conversational sessions: what a session carries from turn to turn, and `/v1/sessions`.
use super::error::ApiError;
use super::shared::Daemon;
use crate::state::Caller;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use toolgraph_engine::plan::Earlier;

/// A conversation, as stored: earlier turns' outputs and the values the user gave carry into the
/// next run (any replica of the deployment can serve the next turn).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct SessionState {
    #[serde(default)]
    pub(super) turns: Vec<Value>,
    #[serde(default)]
    pub(super) earlier: Vec<EarlierRecord>,
    #[serde(default)]
    pub(super) given: Map<String, Value>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct EarlierRecord {
    pub(super) turn: usize,
    pub(super) request: String,
    pub(super) api: String,
    pub(super) response: Value,
}

impl SessionState {
    pub(super) fn of(v: Value) -> Self {
        serde_json::from_value(v).unwrap_or_default()
    }
    pub(super) fn earlier(&self) -> Vec<Earlier> {
        self.earlier.iter().map(|e| Earlier::new(e.turn, &e.request, &e.api, Arc::new(e.response.clone()))).collect()
    }
}

/// Turn summaries a session keeps (older turns stay in the run history).
pub(super) const MAX_SESSION_TURNS: usize = 100;
/// Given values a session keeps across its turns.
pub(super) const MAX_SESSION_GIVEN: usize = 200;
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct NewSession {
    session_id: String,
}

/// Start a conversation.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", responses((status = 201, description = "started", body = NewSession)))]
pub(super) async fn create_session(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
) -> Result<(StatusCode, Json<NewSession>), ApiError> {
    let id = d.new_id("ses");
    d.state.put_session(&id, &caller.user_id, &json!(SessionState::default())).await?;
    Ok((StatusCode::CREATED, Json(NewSession { session_id: id })))
}

pub(super) async fn own_session(d: &Daemon, caller: &Caller, id: &str) -> Result<(Value, i64), ApiError> {
    match d.state.session(id).await? {
        Some((owner, st, at)) if owner == caller.user_id => Ok((st, at)),
        _ => Err(ApiError::not_found(format!("no session {id}"))),
    }
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SessionsQuery {
    /// 1 to 200 (default 20).
    #[param(minimum = 1, maximum = 200)]
    pub(super) limit: Option<usize>,
}

/// A conversation in a list.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SessionSummary {
    session_id: String,
    updated_ms: i64,
    /// Turns kept.
    turns: usize,
    /// Its first request.
    title: Option<String>,
    /// Its last run's status.
    last_status: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Sessions {
    sessions: Vec<SessionSummary>,
}

/// The caller's conversations, most recently used first.
///
/// Each with its kept turns' count, first request and last status.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", params(SessionsQuery), responses((status = 200, description = "the conversations", body = Sessions)))]
pub(super) async fn list_sessions(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<SessionsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Sessions>, ApiError> {
    let limit = q?.0.limit.unwrap_or(20);
    if limit == 0 || limit > 200 {
        return Err(ApiError::invalid("limit: 1 to 200"));
    }
    let list = d
        .state
        .list_sessions(&caller.user_id, limit)
        .await?
        .into_iter()
        .map(|(id, st, at)| {
            let s = SessionState::of(st);
            let first = s.turns.first().and_then(|t| t.get("request")).and_then(Value::as_str).map(str::to_string);
            let last = s.turns.last().and_then(|t| t.get("status")).and_then(Value::as_str).map(str::to_string);
            SessionSummary { session_id: id, updated_ms: at, turns: s.turns.len(), title: first, last_status: last }
        })
        .collect();
    Ok(Json(Sessions { sessions: list }))
}

/// A conversation: its turns and the values given so far.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SessionView {
    session_id: String,
    /// Each turn: request, run id, status, answer.
    turns: Vec<Value>,
    /// Values the user gave (they carry into the next turns).
    given: Map<String, Value>,
    /// Seconds since it was last used.
    idle_s: i64,
}

/// A conversation's turns.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "the session's id")), responses((status = 200, description = "the conversation", body = SessionView)))]
pub(super) async fn get_session(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let (st, at) = own_session(&d, &caller, &id).await?;
    let s = SessionState::of(st);
    let idle_s = (crate::state::now_ms() - at).max(0) / 1000;
    Ok(Json(SessionView { session_id: id, turns: s.turns, given: s.given, idle_s }))
}

/// End a conversation.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "the session's id")), responses((status = 204, description = "deleted")))]
pub(super) async fn delete_session(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    own_session(&d, &caller, &id).await?;
    d.state.delete_session(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
