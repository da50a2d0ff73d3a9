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
use super::Daemon;
use crate::state::{Caller, StateStore};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Digest;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use toolgraph_engine::run::{ApprovalDecision, Approver, PendingCall};

/// How often a paused run looks for its decision.
const POLL: Duration = Duration::from_millis(250);

/// The key of a call within a run: its API and canonical resolved arguments.
pub fn call_key(call: &PendingCall) -> String {
    let args = serde_json::to_string(&call.arguments).unwrap_or_default();
    let d = sha2::Sha256::digest(format!("{}\u{0}{args}", call.api).as_bytes());
    crate::state::hex(&d[..12])
}

/// The approver of one run.
pub struct RunApprover {
    state: Arc<StateStore>,
    run_id: String,
    required: Arc<HashSet<String>>,
    paused: mpsc::Sender<Value>,
    /// The run's in-flight slot: given back while it waits for a person.
    permit: Mutex<Option<super::runs::Slot>>,
    timeout: Duration,
    lease_ms: i64,
}

impl RunApprover {
    pub fn new(d: &Daemon, job: &Job, paused: mpsc::Sender<Value>, permit: super::runs::Slot) -> Arc<Self> {
        let s = &d.settings().server;
        Arc::new(RunApprover {
            state: d.state.clone(),
            run_id: job.run_id.clone(),
            required: d.approval_apis(),
            paused,
            permit: Mutex::new(Some(permit)),
            timeout: Duration::from_secs(s.approval_timeout_s.max(1)),
            lease_ms: s.approval_lease_ms.max(100) as i64,
        })
    }

    async fn wait(&self, call: &PendingCall, key: &str) -> Result<ApprovalDecision, crate::state::StateError> {
        if let Some(d) = self.state.decision(&self.run_id, key).await? {
            // Decided already (while the run was being taken over, or the same call again): the
            // run goes on, and its record says so.
            self.state.set_run_paused(&self.run_id, None, crate::state::now_ms() + self.lease_ms).await?;
            return Ok(decision_of(d));
        }
        let pending = json!({"call_key": key, "api": call.api, "name": call.name, "arguments": call.arguments});
        self.state.set_run_paused(&self.run_id, Some(&pending), crate::state::now_ms() + self.lease_ms).await?;
        tracing::info!(api = %call.api, "run paused: the call waits for approval");
        // The slot goes back while a person decides; the caller learns the run is paused.
        drop(self.permit.lock().unwrap_or_else(|p| p.into_inner()).take());
        let _ = self.paused.try_send(pending);
        let started = Instant::now();
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(POLL).await;
            if let Some(d) = self.state.decision(&self.run_id, key).await? {
                self.state.set_run_paused(&self.run_id, None, crate::state::now_ms() + self.lease_ms).await?;
                return Ok(decision_of(d));
            }
            if started.elapsed() >= self.timeout {
                let reason = format!("no decision within {} s", self.timeout.as_secs());
                self.state.decide(&self.run_id, key, false, "timeout", &reason).await?;
                self.state.set_run_paused(&self.run_id, None, crate::state::now_ms() + self.lease_ms).await?;
                return Ok(ApprovalDecision::Rejected { by: "timeout".into(), reason });
            }
            if renewed.elapsed().as_millis() as i64 >= self.lease_ms / 3 {
                self.state.renew_lease(&self.run_id, self.lease_ms).await?;
                renewed = Instant::now();
            }
        }
    }
}

fn decision_of((approved, by, reason): (bool, String, String)) -> ApprovalDecision {
    if approved {
        ApprovalDecision::Approved { by }
    } else {
        ApprovalDecision::Rejected { by, reason }
    }
}

#[async_trait::async_trait]
impl Approver for RunApprover {
    fn requires(&self, api: &str) -> bool {
        self.required.contains(api)
    }

    async fn decide(&self, call: &PendingCall) -> ApprovalDecision {
        let key = call_key(call);
        match self.wait(call, &key).await {
            Ok(d) => d,
            // Without the state store nobody can approve: refusing is the safe answer.
            Err(e) => {
                tracing::error!(error = %e, "approval state unavailable; the call is refused");
                ApprovalDecision::Rejected {
                    by: "toolgraph".into(),
                    reason: "the approval could not be recorded".into(),
                }
            }
        }
    }
}

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
