//! API health: an API whose calls keep failing leaves search (`degraded`) until a probe — its last
//! call that worked, replayed — succeeds again; one that keeps failing its probes becomes
//! `invalid`. Thresholds come from [`HealthSettings`]. The tracker only decides; the caller writes
//! the status changes to the graph (and logs them).
//!
//! Whose evidence counts: a failure the tool blames on the arguments (a 4xx, "no result") counts
//! for nobody; failures with one set of arguments only are that request's; where the callers are
//! named users (a daemon with keys), an API is down **for all** only when calls of two or more
//! users fail — one user's failures, however many and with whatever arguments, degrade it for
//! that user alone, for one probe interval (their runs stop sending it; nobody else's are
//! refused). The local operator (the CLI, a daemon without keys) is one caller: its failures
//! degrade the API as before.

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, RwLock};
use toolgraph_schema::{GraphSnapshot, HealthSettings, StatusChange, STATUS_ACTIVE, STATUS_DEGRADED, STATUS_INVALID};

/// One call a run sent to a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct SentCall {
    pub api: String,
    pub ok: bool,
    /// The tool refused it for its arguments (a 4xx answer, or an error-shaped "no result"): the
    /// caller's mistake, not the API's fault. Only faults of the API (5xx, timeouts, connection
    /// errors, after retries) count against its health.
    pub refused: bool,
    /// The arguments as sent, for a successful call on the final chain (what a health probe can
    /// replay); `None` otherwise.
    pub arguments: Option<Map<String, Value>>,
    /// For a failed call, the arguments it was made with (health tells one request's bad
    /// arguments from an API that fails for every request); `None` otherwise.
    pub failed_with: Option<Map<String, Value>>,
}

/// Now, as the graph records status times.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[derive(Debug, Default)]
struct ApiHealth {
    consecutive: u32,
    /// Who made the calls of the current run of failures, and with which arguments.
    streak_callers: HashSet<String>,
    streak_arguments: HashSet<String>,
    /// The last calls: whether each worked, who made it, and (failed ones) with which arguments.
    window: VecDeque<(bool, String, String)>,
    /// Per named user: failed calls in a row, and the arguments they failed with.
    users: HashMap<String, (u32, HashSet<String>)>,
    /// The arguments of the last successful call (what a probe replays).
    last_ok: Option<Map<String, Value>>,
    failed_probes: u32,
}

/// Health of every API the engine called, shared by the engines a daemon builds over time.
#[derive(Debug)]
pub struct Health {
    settings: HealthSettings,
    apis: Mutex<HashMap<String, ApiHealth>>,
    degraded: RwLock<HashSet<String>>,
    /// (user, API) → until when the API is degraded for that user only.
    degraded_for: RwLock<HashMap<(String, String), std::time::Instant>>,
}

/// Users whose own degradations are remembered at once (the oldest are forgotten first).
const MAX_USER_DEGRADED: usize = 10_000;

impl Health {
    /// A tracker that knows which APIs `graph` has degraded already.
    pub fn new(settings: HealthSettings, graph: &GraphSnapshot) -> Self {
        let degraded = graph.apis.values().filter(|a| a.status == STATUS_DEGRADED).map(|a| a.id.clone()).collect();
        Health {
            settings,
            apis: Mutex::new(HashMap::new()),
            degraded: RwLock::new(degraded),
            degraded_for: RwLock::new(HashMap::new()),
        }
    }

    /// Its settings.
    pub fn settings(&self) -> &HealthSettings {
        &self.settings
    }

    /// Whether search must leave `id` out (for everyone).
    pub fn is_degraded(&self, id: &str) -> bool {
        self.settings.enabled && self.degraded.read().unwrap_or_else(|p| p.into_inner()).contains(id)
    }

    /// Whether search must leave `id` out of `user`'s runs: degraded for all, or by that user's
    /// own failures within the last probe interval.
    pub fn is_degraded_for(&self, id: &str, user: Option<&str>) -> bool {
        if self.is_degraded(id) {
            return true;
        }
        let Some(user) = user.filter(|u| !u.is_empty()) else { return false };
        let map = self.degraded_for.read().unwrap_or_else(|p| p.into_inner());
        map.get(&(user.to_string(), id.to_string())).is_some_and(|until| std::time::Instant::now() < *until)
    }

    /// `user`'s own failures of `api` met the thresholds: degraded for that user for one probe
    /// interval.
    fn degrade_for(&self, user: &str, api: &str) {
        let now = std::time::Instant::now();
        let until = now + std::time::Duration::from_millis(self.settings.probe_every_ms.max(1000));
        let mut map = self.degraded_for.write().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, t| *t > now);
        if map.len() >= MAX_USER_DEGRADED {
            if let Some(oldest) = map.iter().min_by_key(|(_, t)| **t).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert((user.to_string(), api.to_string()), until);
    }

    /// Record the calls of one run made for `caller` (`None`: the local operator); returns the APIs
    /// that must now be marked `degraded`. Calls the tool refused for their arguments do not count
    /// ([`SentCall::refused`]); a fault counts against the API only where it also fails for other
    /// arguments or other callers: failures with one set of arguments alone (a request the tool
    /// cannot serve, sent again and again) never degrade it, and when several callers use an API,
    /// failures of one caller alone never degrade it for the others.
    pub fn observe(&self, calls: &[SentCall], caller: Option<&str>) -> Vec<StatusChange> {
        let caller = caller.unwrap_or_default().to_string();
        if !self.settings.enabled {
            return Vec::new();
        }
        let mut changes = Vec::new();
        let mut apis = self.apis.lock().unwrap_or_else(|p| p.into_inner());
        let mut degraded = self.degraded.write().unwrap_or_else(|p| p.into_inner());
        for c in calls.iter().filter(|c| !c.refused) {
            let h = apis.entry(c.api.clone()).or_default();
            let args = c.failed_with.as_ref().map(|a| Value::Object(a.clone()).to_string()).unwrap_or_default();
            if c.ok {
                h.consecutive = 0;
                h.streak_callers.clear();
                h.streak_arguments.clear();
                h.users.remove(&caller);
            } else {
                h.consecutive += 1;
                h.streak_callers.insert(caller.clone());
                h.streak_arguments.insert(args.clone());
                if !caller.is_empty() {
                    if h.users.len() >= MAX_USER_DEGRADED && !h.users.contains_key(&caller) {
                        h.users.clear();
                    }
                    let u = h.users.entry(caller.clone()).or_default();
                    u.0 += 1;
                    if u.1.len() < 8 {
                        u.1.insert(args.clone());
                    }
                    let limit = self.settings.consecutive_failures.max(1);
                    if u.0 >= limit && u.1.len() >= 2 {
                        self.degrade_for(&caller, &c.api);
                    }
                }
            }
            h.window.push_back((c.ok, caller.clone(), args));
            while h.window.len() > self.settings.window.max(1) {
                h.window.pop_front();
            }
            if c.ok {
                if let Some(a) = &c.arguments {
                    h.last_ok = Some(a.clone());
                }
                continue;
            }
            if degraded.contains(&c.api) {
                continue;
            }
            let ok = h.window.iter().filter(|x| x.0).count();
            let availability = ok as f64 / h.window.len().max(1) as f64;
            // Several callers use it: the failures must come from more than one of them.
            let callers: HashSet<&str> = h.window.iter().map(|x| x.1.as_str()).collect();
            let failing: HashSet<&str> = h.window.iter().filter(|x| !x.0).map(|x| x.1.as_str()).collect();
            // Named users (a daemon with keys): down for all only on the failures of two or more.
            let shared = callers.len() > 1 || !caller.is_empty();
            // Failing for more than one request: other arguments, or other callers.
            let failing_args: HashSet<(&str, &str)> =
                h.window.iter().filter(|x| !x.0).map(|x| (x.1.as_str(), x.2.as_str())).collect();
            let one_request = h.streak_arguments.len() < 2 && h.streak_callers.len() < 2 || failing_args.len() < 2;
            let reason = if shared && (h.streak_callers.len() < 2 || failing.len() < 2) || one_request {
                None
            } else if self.settings.consecutive_failures > 0 && h.consecutive >= self.settings.consecutive_failures {
                Some(format!("{} calls in a row failed", h.consecutive))
            } else if h.window.len() >= self.settings.window.max(1) && availability < self.settings.min_availability {
                Some(format!(
                    "availability {availability:.2} over the last {} calls is below {}",
                    h.window.len(),
                    self.settings.min_availability
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                degraded.insert(c.api.clone());
                h.failed_probes = 0;
                changes.push(StatusChange {
                    id: c.api.clone(),
                    status: STATUS_DEGRADED.into(),
                    reason,
                    since: now_rfc3339(),
                    probe: h.last_ok.as_ref().map(|a| Value::Object(a.clone()).to_string()),
                });
            }
        }
        changes
    }

    /// The degraded APIs now.
    pub fn degraded(&self) -> Vec<String> {
        let mut v: Vec<String> = self.degraded.read().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        v.sort();
        v
    }

    /// A probe of `id` worked: it is active again (the change to write).
    pub fn probe_succeeded(&self, id: &str, detail: &str) -> StatusChange {
        self.degraded.write().unwrap_or_else(|p| p.into_inner()).remove(id);
        self.degraded_for.write().unwrap_or_else(|p| p.into_inner()).retain(|(_, api), _| api != id);
        let mut apis = self.apis.lock().unwrap_or_else(|p| p.into_inner());
        let h = apis.entry(id.to_string()).or_default();
        h.consecutive = 0;
        h.streak_callers.clear();
        h.window.clear();
        h.failed_probes = 0;
        StatusChange {
            id: id.into(),
            status: STATUS_ACTIVE.into(),
            reason: format!("probe succeeded: {detail}"),
            since: now_rfc3339(),
            probe: None,
        }
    }

    /// A probe of `id` failed: `Some(change)` when the API is now to be marked `invalid`.
    pub fn probe_failed(&self, id: &str, detail: &str) -> Option<StatusChange> {
        let mut apis = self.apis.lock().unwrap_or_else(|p| p.into_inner());
        let h = apis.entry(id.to_string()).or_default();
        h.failed_probes += 1;
        let limit = self.settings.invalid_after_probes;
        if limit == 0 || h.failed_probes < limit {
            return None;
        }
        self.degraded.write().unwrap_or_else(|p| p.into_inner()).remove(id);
        Some(StatusChange {
            id: id.into(),
            status: STATUS_INVALID.into(),
            reason: format!("{} probes in a row failed; last: {detail}", h.failed_probes),
            since: now_rfc3339(),
            probe: None,
        })
    }

    /// Forget what is known of `id` (an operator changed its status).
    pub fn reset(&self, id: &str) {
        self.degraded.write().unwrap_or_else(|p| p.into_inner()).remove(id);
        self.degraded_for.write().unwrap_or_else(|p| p.into_inner()).retain(|(_, api), _| api != id);
        self.apis.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A call; a failed one with arguments of its own each time (an API failing for every request).
    fn call(api: &str, ok: bool) -> SentCall {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        SentCall {
            api: api.into(),
            ok,
            refused: false,
            arguments: ok.then(|| json!({"q": "x"}).as_object().unwrap().clone()),
            failed_with: (!ok).then(|| json!({"q": format!("request {n}")}).as_object().unwrap().clone()),
        }
    }

    fn refused(api: &str) -> SentCall {
        SentCall { api: api.into(), ok: false, refused: true, arguments: None, failed_with: None }
    }

    /// Second hardening, finding 6: one user's arguments that make a tool answer 500, sent again
    /// and again, degraded the API for everyone. A fault counts only where it also fails for
    /// other arguments or other callers.
    #[test]
    fn one_requests_failures_alone_never_degrade_an_api() {
        let h = Health::new(
            HealthSettings { consecutive_failures: 3, window: 4, min_availability: 0.5, ..HealthSettings::default() },
            &GraphSnapshot::default(),
        );
        let same = |ok: bool| SentCall {
            api: "a".into(),
            ok,
            refused: false,
            arguments: None,
            failed_with: (!ok).then(|| json!({"city": "Atlantis"}).as_object().unwrap().clone()),
        };
        for _ in 0..20 {
            assert!(h.observe(&[same(false)], Some("eve")).is_empty());
        }
        assert!(!h.is_degraded("a"));
        assert!(!h.is_degraded_for("a", Some("eve")), "one request's failures are that request's");
        // Failing for other arguments too: at fault for eve, and for all once another user's
        // calls fail as well.
        assert!(h.observe(&[call("a", false)], Some("eve")).is_empty());
        assert!(h.is_degraded_for("a", Some("eve")) && !h.is_degraded("a"));
        assert!(h.observe(&[call("a", false)], Some("dan")).len() == 1);
        assert!(h.is_degraded("a"));
    }

    /// Third hardening, finding 1: bob's calls whose arguments make a tool fail (5xx, timeouts,
    /// each with other arguments) degraded the API for everyone: alice and the admin were refused
    /// it. One user's evidence degrades it for that user alone; two users' failures, for all.
    #[test]
    fn one_users_failures_degrade_an_api_for_that_user_only() {
        let h = Health::new(
            HealthSettings { consecutive_failures: 3, window: 20, min_availability: 0.5, ..HealthSettings::default() },
            &GraphSnapshot::default(),
        );
        for _ in 0..12 {
            assert!(h.observe(&[call("a", false)], Some("bob")).is_empty(), "bob alone never degrades it for all");
        }
        assert!(!h.is_degraded("a"));
        assert!(h.is_degraded_for("a", Some("bob")));
        assert!(!h.is_degraded_for("a", Some("alice")) && !h.is_degraded_for("a", None));
        // Alice's call works: still nobody else's problem; bob's own streak goes on.
        assert!(h.observe(&[call("a", true)], Some("alice")).is_empty());
        assert!(h.is_degraded_for("a", Some("bob")) && !h.is_degraded_for("a", Some("alice")));
        // Then the API fails for alice too, right after bob (three in a row): down for all.
        assert!(h.observe(&[call("a", false)], Some("bob")).is_empty());
        assert!(h.observe(&[call("a", false)], Some("alice")).is_empty());
        assert_eq!(h.observe(&[call("a", false)], Some("alice")).len(), 1);
        assert!(h.is_degraded("a") && h.is_degraded_for("a", Some("carol")));
        // A probe that works restores it for everyone, bob included.
        h.probe_succeeded("a", "HTTP 200");
        assert!(!h.is_degraded_for("a", Some("bob")));
    }

    #[test]
    fn refusals_for_bad_arguments_never_degrade_an_api() {
        let h = Health::new(
            HealthSettings { consecutive_failures: 2, window: 4, min_availability: 0.5, ..HealthSettings::default() },
            &GraphSnapshot::default(),
        );
        for _ in 0..10 {
            assert!(h.observe(&[refused("a")], Some("u1")).is_empty());
        }
        assert!(!h.is_degraded("a"));
        // Its own faults still do (two users' failures: down for all).
        assert!(h.observe(&[call("a", false)], Some("u1")).is_empty());
        assert_eq!(h.observe(&[call("a", false)], Some("u2")).len(), 1);
    }

    #[test]
    fn one_callers_failures_do_not_degrade_an_api_others_use() {
        let h = Health::new(
            HealthSettings { consecutive_failures: 3, window: 10, min_availability: 0.0, ..HealthSettings::default() },
            &GraphSnapshot::default(),
        );
        assert!(h.observe(&[call("a", true)], Some("u1")).is_empty());
        assert!(
            h.observe(
                &[call("a", false), call("a", false), call("a", false), call("a", false), call("a", false)],
                Some("mallory")
            )
            .is_empty(),
            "one caller alone"
        );
        assert!(!h.is_degraded("a"));
        // A second caller failing too: the API is at fault.
        assert_eq!(h.observe(&[call("a", false)], Some("u1")).len(), 1);
        assert!(h.is_degraded("a"));
        // A deployment with one caller (the CLI) is degraded by its failures, as before.
        let solo = Health::new(
            HealthSettings { consecutive_failures: 3, window: 10, ..HealthSettings::default() },
            &GraphSnapshot::default(),
        );
        assert_eq!(solo.observe(&[call("b", false), call("b", false), call("b", false)], None).len(), 1);
    }

    #[test]
    fn consecutive_failures_degrade_then_a_probe_restores() {
        let h = Health::new(
            HealthSettings { consecutive_failures: 3, window: 100, ..HealthSettings::default() },
            &GraphSnapshot::default(),
        );
        assert!(h.observe(&[call("a", true), call("a", false), call("a", false)], None).is_empty());
        let c = h.observe(&[call("a", false)], None);
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].status.as_str(), c[0].reason.as_str(), c[0].probe.as_deref()),
            (STATUS_DEGRADED, "3 calls in a row failed", Some(r#"{"q":"x"}"#))
        );
        assert!(h.is_degraded("a"));
        assert!(h.observe(&[call("a", false)], None).is_empty(), "degraded once");
        assert_eq!(h.probe_succeeded("a", "HTTP 200").status, STATUS_ACTIVE);
        assert!(!h.is_degraded("a"));
    }

    #[test]
    fn low_availability_over_a_full_window_degrades_and_failed_probes_invalidate() {
        let h = Health::new(
            HealthSettings {
                consecutive_failures: 0,
                window: 4,
                min_availability: 0.5,
                invalid_after_probes: 2,
                ..HealthSettings::default()
            },
            &GraphSnapshot::default(),
        );
        assert!(h.observe(&[call("b", false), call("b", true), call("b", false)], None).is_empty(), "window not full");
        let c = h.observe(&[call("b", false)], None);
        assert!(c[0].reason.starts_with("availability 0.25 over the last 4 calls"), "{}", c[0].reason);
        assert!(h.probe_failed("b", "HTTP 503").is_none());
        assert_eq!(h.probe_failed("b", "HTTP 503").map(|c| c.status), Some(STATUS_INVALID.to_string()));
        assert!(!h.is_degraded("b"));
    }
}
