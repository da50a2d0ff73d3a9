//! Human in the loop: APIs marked `requires_approval` (anything that books, pays or sends) pause
//! the run before their call. The run's record turns `awaiting_approval` with the exact call (API
//! and resolved arguments); `POST /v1/runs/{id}/approve` or `/reject` decides (the run's owner or
//! an administrator; the first decision wins). A rejection fails that branch and the search goes
//! on.
//!
//! Paused runs are durable: the decision lives in the state store and the daemon holding the run
//! renews a lease on it. When that daemon goes away, the lease lapses and any daemon of the
//! deployment resumes the run: it runs the request again under the same run id, and the decided
//! call goes through (or is refused) without asking again. Calls before it are sent again (they
//! are the reads that led to it; the call that needed approval is sent at most once per decision).

use super::error::{ApiError, ApiJson};
use super::runs::{start_run, visible_run, Job};
use super::shared::Daemon;
use crate::state::Caller;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionBody {
    /// Why (kept in the run and the audit log).
    #[serde(default)]
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// A decision taken.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Decision {
    run_id: String,
    /// `approved` or `rejected`.
    decision: &'static str,
    /// The call decided on (api, name, arguments, call_key).
    call: Value,
}

async fn decide(
    d: Arc<Daemon>,
    caller: Caller,
    id: String,
    body: Option<ApiJson<DecisionBody>>,
    approved: bool,
) -> Result<Json<Decision>, ApiError> {
    let run = visible_run(&d, &caller, &id).await?;
    let pending = match (&run.pending, run.status.as_str()) {
        (Some(p), "awaiting_approval") => p.clone(),
        _ => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "not_awaiting_approval",
                format!("run {id} is {} and waits for no approval", run.status),
            ))
        }
    };
    let key = pending.get("call_key").and_then(Value::as_str).unwrap_or_default().to_string();
    let reason = body.and_then(|b| b.0.reason).unwrap_or_default();
    if reason.chars().count() > 500 {
        return Err(ApiError::invalid("reason: at most 500 characters"));
    }
    let reason = if reason.trim().is_empty() && !approved { "rejected".to_string() } else { reason };
    if !d.state.decide(&id, &key, approved, &caller.name, &reason).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_decided",
            format!("the call of run {id} was decided already"),
        ));
    }
    // The run waits on this daemon: it goes on at once.
    if let Some(w) = d.wakers.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
        w.notify_one();
    }
    d.audit(
        &caller,
        if approved { "run.approve" } else { "run.reject" },
        &id,
        json!({"api": pending.get("api"), "reason": reason}),
    )
    .await;
    Ok(Json(Decision { run_id: id, decision: if approved { "approved" } else { "rejected" }, call: pending }))
}

/// Approve the call a paused run waits on (the owner or an administrator; the first decision wins).
#[utoipa::path(post, path = "/v1/runs/{id}/approve", tag = "runs", params(("id" = String, Path, description = "the run's id")), request_body = Option<DecisionBody>,
    responses((status = 200, description = "decided", body = Decision), (status = 409, description = "not awaiting approval, or decided already", body = super::error::ErrorBody)))]
pub(super) async fn approve(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Option<ApiJson<DecisionBody>>,
) -> Result<Json<Decision>, ApiError> {
    decide(d, caller, id, body, true).await
}

/// Reject the call a paused run waits on: that branch fails, the search goes on.
#[utoipa::path(post, path = "/v1/runs/{id}/reject", tag = "runs", params(("id" = String, Path, description = "the run's id")), request_body = Option<DecisionBody>,
    responses((status = 200, description = "decided", body = Decision), (status = 409, description = "not awaiting approval, or decided already", body = super::error::ErrorBody)))]
pub(super) async fn reject(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Option<ApiJson<DecisionBody>>,
) -> Result<Json<Decision>, ApiError> {
    decide(d, caller, id, body, false).await
}

/// Resume paused runs whose daemon went away (their lease lapsed): claim each, then run it again
/// under its id. Returns how many were resumed.
pub(super) async fn resume_orphans(d: &Arc<Daemon>) -> Result<usize, ApiError> {
    let mut n = 0;
    for r in d.state.orphaned_runs().await? {
        if d.active_runs.lock().unwrap_or_else(|p| p.into_inner()).contains(&r.id) {
            continue;
        }
        let lease = d.settings().server.approval_lease_ms.max(100) as i64;
        if !d.state.claim_run(&r.id, lease).await? {
            continue;
        }
        let Some(user) =
            d.state.user(&r.user_id).await?.map(|u| Caller { user_id: u.id, name: u.name, role: u.role }).or_else(
                || {
                    (r.user_id == "bootstrap" || r.user_id == "local").then(|| Caller {
                        user_id: r.user_id.clone(),
                        name: r.user_id.clone(),
                        role: crate::state::Role::Admin,
                    })
                },
            )
        else {
            continue;
        };
        let work = super::history::work_of(d, &r.options, &r.session_id).await?;
        let job = Job {
            run_id: r.id.clone(),
            session_id: r.session_id.clone(),
            caller: user,
            request: r.request.clone(),
            options: r.options.clone(),
            session: None,
            work,
            resumed: true,
        };
        tracing::info!(run_id = %r.id, "resuming a paused run whose daemon went away");
        let dd = d.clone();
        // Started like any run; its answer goes to the state store (the original caller polls it).
        tokio::spawn(async move {
            if let Err(e) = start_run(dd, job, false).await {
                tracing::warn!(error = %e, "resuming a paused run failed");
            }
        });
        n += 1;
    }
    Ok(n)
}
