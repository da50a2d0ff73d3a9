//! Background upkeep: the learned graph reloaded, degraded APIs probed, paused runs resumed,
//! retention kept, imported MCP servers followed; and how it stops with the daemon.
use super::approvals;
use super::shared::{Daemon, ABANDON_WAIT};
use serde_json::{Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The daemon's background upkeep ([`maintain`]) for a server that is not [`serve`] (`toolgraph
/// mcp` on stdio): the graph the runs taught is reloaded, paused runs resumed, retention kept.
pub struct Upkeep {
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    pub(super) task: AbortOnDrop,
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

pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    /// Wait for the task to end on its own for at most `wait`, else end it (and wait for that).
    pub(super) async fn finish(&mut self, wait: Duration) {
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

/// How often the upkeep checks whether the store changed (and reloads the graph when it did).
pub(super) const REFRESH_EVERY: Duration = Duration::from_secs(5);

/// Follow the MCP servers' `notifications/tools/list_changed`: import the server's tools again
/// (new ones admitted, removed ones invalidated), re-index, reload.
#[cfg(feature = "mcp")]
pub(super) async fn follow_mcp(d: Arc<Daemon>) {
    let Some(mut changes) = d.mcp.take_changes() else { return };
    while let Some(server) = changes.recv().await {
        let _admin = d.admin.lock().await;
        match crate::mcp::import(&d.mcp, &server, d.stack.store.as_ref()).await {
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
pub(super) async fn maintain(d: Arc<Daemon>, mut stop: tokio::sync::watch::Receiver<bool>) {
    #[cfg(feature = "mcp")]
    let _follower = AbortOnDrop(tokio::spawn(follow_mcp(d.clone())));
    let probe_every = Duration::from_millis(d.settings().health.probe_every_ms.max(100));
    let lease = Duration::from_millis(d.settings().server.approval_lease_ms.max(100));
    // Leases are renewed three times within their length.
    let tick = REFRESH_EVERY.min(probe_every).min(lease / 3);
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
        let running: Vec<String> = d.active_runs.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        if let Err(e) = d.state.renew_running(&running, lease.as_millis() as i64).await {
            tracing::warn!(error = %e, "renewing the leases of running runs failed");
        }
        match d.state.interrupt_abandoned_runs().await {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(runs = ids.len(), first = %ids[0], "runs whose daemon stopped mid-way marked interrupted")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "marking abandoned runs interrupted failed"),
        }
        if last_retention.is_none_or(|t| t.elapsed() >= retention_every) {
            last_retention = Some(Instant::now());
            let st = &d.settings().state;
            match d.state.enforce_retention(st.retention_days, st.retention_runs, st.audit_days).await {
                Ok(p) if p.runs + p.sessions + p.audit > 0 => {
                    tracing::info!(runs = p.runs, sessions = p.sessions, audit = p.audit, "retention removed old state")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "retention failed"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        match d.refresh_graph().await {
            Ok(true) => tracing::debug!("reloaded the graph: the store changed"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "reloading the learned graph failed; the engine keeps the graph it has")
            }
        }
        if d.settings().health.enabled && last_probe.elapsed() >= probe_every {
            last_probe = Instant::now();
            if let Err(e) = d.probe_degraded().await {
                tracing::warn!(error = %e, "probing degraded APIs failed");
            }
        }
    }
}

impl Daemon {
    /// Load the graph and the argument model again when the store changed since they were
    /// loaded (runs of this daemon or of another on the same store, an ingest, a status change),
    /// keeping the rest of the engine.
    pub async fn refresh_graph(&self) -> toolgraph_engine::Result<bool> {
        // One load at a time: one that read the graph before a registration's write must not
        // replace the engine that registration loaded after it.
        let _swap = self.swapping.lock().await;
        // Read before the snapshot: a write during it moves the generation again.
        let now = self.stack.store.generation().await?;
        if self.graph_generation.load(Ordering::SeqCst) == now {
            return Ok(false);
        }
        let snapshot = Arc::new(self.stack.store.snapshot().await?);
        let engine = self.engine().refreshed(snapshot).await;
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(engine);
        self.graph_generation.store(now, Ordering::SeqCst);
        Ok(true)
    }

    /// Probe every degraded API once with its recorded call: a success makes it active again, too
    /// many failures in a row `invalid` (its memories deleted). Returns the changes made.
    pub async fn probe_degraded(&self) -> toolgraph_engine::Result<Vec<toolgraph_schema::StatusChange>> {
        let ids = self.health.degraded();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let snap = self.stack.store.node_snapshot().await?;
        let mut changes = Vec::new();
        for id in ids {
            let Some(node) = snap.apis.get(&id) else { continue };
            let args: Map<String, Value> = match serde_json::from_str(&node.probe) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            let spec = toolgraph_engine::exec::CallSpec::from_node(node);
            let outcome =
                self.stack.executor.call(&spec, &args, &std::collections::HashMap::<String, Value>::new()).await;
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
                self.stack.store.set_api_status(&c).await?;
                tracing::warn!(api = %c.id, status = %c.status, reason = %c.reason, "API status changed");
                if c.status == toolgraph_schema::STATUS_INVALID {
                    let n = self.stack.memory.forget_api(&c.id).await?;
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
}
