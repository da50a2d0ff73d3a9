//! A run paused for approval, from the run's side: the [`RunApprover`] the engine asks before a
//! call to an API that `requires_approval`. It records the pending call, gives the run's slot back
//! while a person decides, renews the run's lease, and takes the decision from the state store
//! (wherever it was given: any daemon of the deployment). The HTTP side is [`super::approvals`].
//!
//! A paused run costs nothing while it waits: a decision taken on this daemon wakes it; one taken
//! on another daemon is read when the run renews its lease (every third of
//! `server.approval_lease_ms`). One user may have at most `server.max_parked_per_user` runs
//! paused at once: a run that would pause beyond that is refused the call at once.

use super::shared::{Daemon, Slot};
use crate::state::StateStore;
use serde_json::{json, Value};
use sha2::Digest;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use toolgraph_engine::run::{ApprovalDecision, Approver, PendingCall};

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
    user: String,
    /// The daemon's parked-run counts and wakers (see [`Daemon`]).
    parked: Arc<ParkedRuns>,
    required: Arc<HashSet<String>>,
    paused: mpsc::Sender<Value>,
    /// The run's in-flight slot: given back while it waits for a person.
    permit: Mutex<Option<Slot>>,
    timeout: Duration,
    lease_ms: i64,
}

impl RunApprover {
    pub fn new(d: &Arc<Daemon>, run_id: &str, user: &str, paused: mpsc::Sender<Value>, permit: Slot) -> Arc<Self> {
        let s = &d.settings().server;
        Arc::new(RunApprover {
            state: d.state.clone(),
            run_id: run_id.to_string(),
            user: user.to_string(),
            parked: Arc::new(ParkedRuns { daemon: d.clone(), limit: s.max_parked_per_user.max(1) }),
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
        let Some(parked_run) = self.parked.park(&self.user, &self.run_id) else {
            let reason = format!(
                "{} runs of this user already wait for approval (server.max_parked_per_user): decide those first",
                self.parked.limit
            );
            self.state.decide(&self.run_id, key, false, "toolgraph", &reason).await?;
            return Ok(ApprovalDecision::Rejected { by: "toolgraph".into(), reason });
        };
        let waker = parked_run.waker.clone();
        let pending = json!({"call_key": key, "api": call.api, "name": call.name, "arguments": call.arguments});
        self.state.set_run_paused(&self.run_id, Some(&pending), crate::state::now_ms() + self.lease_ms).await?;
        tracing::info!(api = %call.api, "run paused: the call waits for approval");
        // The slot goes back while a person decides; the caller learns the run is paused.
        drop(self.permit.lock().unwrap_or_else(|p| p.into_inner()).take());
        let _ = self.paused.try_send(pending);
        let started = Instant::now();
        let mut renewed = Instant::now();
        let renew_every = Duration::from_millis((self.lease_ms / 3).max(50) as u64);
        loop {
            // Woken by a decision taken here, else at the next renewal (or the timeout).
            let until_renewal = renew_every.saturating_sub(renewed.elapsed());
            let until_timeout = self.timeout.saturating_sub(started.elapsed());
            tokio::select! {
                _ = waker.notified() => {}
                _ = tokio::time::sleep(until_renewal.min(until_timeout)) => {}
            }
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
            if renewed.elapsed() >= renew_every {
                self.state.renew_lease(&self.run_id, self.lease_ms).await?;
                renewed = Instant::now();
            }
        }
    }
}

/// The daemon's parked runs, counted per user (see [`RunApprover`]).
struct ParkedRuns {
    daemon: Arc<Daemon>,
    limit: usize,
}

/// One parked run: counted while it lives, and woken by a decision taken on this daemon.
struct Parked<'a> {
    runs: &'a ParkedRuns,
    user: String,
    run_id: String,
    waker: Arc<tokio::sync::Notify>,
}

impl ParkedRuns {
    /// Count `run_id` as parked for `user`; `None` when the user has `limit` parked already.
    fn park(&self, user: &str, run_id: &str) -> Option<Parked<'_>> {
        {
            let mut counts = self.daemon.parked.lock().unwrap_or_else(|p| p.into_inner());
            let n = counts.entry(user.to_string()).or_default();
            if *n >= self.limit {
                return None;
            }
            *n += 1;
        }
        let waker = Arc::new(tokio::sync::Notify::new());
        self.daemon.wakers.lock().unwrap_or_else(|p| p.into_inner()).insert(run_id.to_string(), waker.clone());
        Some(Parked { runs: self, user: user.to_string(), run_id: run_id.to_string(), waker })
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let d = &self.runs.daemon;
        d.wakers.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.run_id);
        let mut counts = d.parked.lock().unwrap_or_else(|p| p.into_inner());
        let gone = counts.get_mut(&self.user).is_some_and(|n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
        if gone {
            counts.remove(&self.user);
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
