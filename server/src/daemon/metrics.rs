//! Prometheus text exposition of the daemon's counters (requests by route and status, run
//! outcomes, in-flight runs, run latency histogram, refusals).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const BUCKETS_S: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    runs: Mutex<BTreeMap<String, u64>>,
    run_seconds: Mutex<([u64; BUCKETS_S.len()], u64, f64)>,
    llm: Mutex<BTreeMap<String, toolgraph_engine::plan::ModelUsage>>,
    pub in_flight: AtomicU64,
    pub tool_calls: AtomicU64,
    pub tool_call_failures: AtomicU64,
    pub rate_limited: AtomicU64,
    pub busy: AtomicU64,
    pub connections_refused: AtomicU64,
}

impl Metrics {
    pub fn request(&self, method: &str, route: &str, status: u16) {
        let mut m = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((method.to_string(), route.to_string(), status)).or_default() += 1;
    }

    pub fn run(&self, status: &str, seconds: f64, calls: u64, failed: u64) {
        *self.runs.lock().unwrap_or_else(|p| p.into_inner()).entry(status.to_string()).or_default() += 1;
        let mut h = self.run_seconds.lock().unwrap_or_else(|p| p.into_inner());
        for (i, b) in BUCKETS_S.iter().enumerate() {
            if seconds <= *b {
                h.0[i] += 1;
            }
        }
        h.1 += 1;
        h.2 += seconds;
        self.tool_calls.fetch_add(calls, Ordering::Relaxed);
        self.tool_call_failures.fetch_add(failed, Ordering::Relaxed);
    }

    /// LLM calls and tokens of one run, by model.
    pub fn llm(&self, usage: &BTreeMap<String, toolgraph_engine::plan::ModelUsage>) {
        let mut m = self.llm.lock().unwrap_or_else(|p| p.into_inner());
        for (name, u) in usage {
            let e = m.entry(name.clone()).or_default();
            e.calls += u.calls;
            e.prompt_tokens += u.prompt_tokens;
            e.completion_tokens += u.completion_tokens;
            e.ms += u.ms;
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP toolgraph_http_requests_total HTTP requests by method, route and status.\n# TYPE toolgraph_http_requests_total counter");
        for ((m, r, s), n) in self.requests.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "toolgraph_http_requests_total{{method=\"{m}\",route=\"{}\",status=\"{s}\"}} {n}",
                r.replace('"', "'")
            );
        }
        let _ = writeln!(
            out,
            "# HELP toolgraph_runs_total Orchestration runs by final status.\n# TYPE toolgraph_runs_total counter"
        );
        for (s, n) in self.runs.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(out, "toolgraph_runs_total{{status=\"{s}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP toolgraph_llm_calls_total LLM completions asked by runs, by configured model.\n# TYPE toolgraph_llm_calls_total counter");
        let llm = self.llm.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (m, u) in &llm {
            let _ = writeln!(out, "toolgraph_llm_calls_total{{model=\"{}\"}} {}", m.replace('"', "'"), u.calls);
        }
        let _ = writeln!(out, "# HELP toolgraph_llm_tokens_total LLM tokens used by runs, by configured model and kind.\n# TYPE toolgraph_llm_tokens_total counter");
        for (m, u) in &llm {
            let m = m.replace('"', "'");
            let _ = writeln!(out, "toolgraph_llm_tokens_total{{model=\"{m}\",kind=\"prompt\"}} {}\ntoolgraph_llm_tokens_total{{model=\"{m}\",kind=\"completion\"}} {}", u.prompt_tokens, u.completion_tokens);
        }
        let _ = writeln!(out, "# HELP toolgraph_llm_seconds_total Time runs waited for LLM completions, by configured model.\n# TYPE toolgraph_llm_seconds_total counter");
        for (m, u) in &llm {
            let _ = writeln!(
                out,
                "toolgraph_llm_seconds_total{{model=\"{}\"}} {:.3}",
                m.replace('"', "'"),
                u.ms as f64 / 1000.0
            );
        }
        let h = *self.run_seconds.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "# HELP toolgraph_run_duration_seconds Wall time of orchestration runs.\n# TYPE toolgraph_run_duration_seconds histogram");
        for (i, b) in BUCKETS_S.iter().enumerate() {
            let _ = writeln!(out, "toolgraph_run_duration_seconds_bucket{{le=\"{b}\"}} {}", h.0[i]);
        }
        let _ = writeln!(out, "toolgraph_run_duration_seconds_bucket{{le=\"+Inf\"}} {}\ntoolgraph_run_duration_seconds_sum {}\ntoolgraph_run_duration_seconds_count {}", h.1, h.2, h.1);
        for (name, help, kind, v) in [
            ("toolgraph_runs_in_flight", "Runs executing now.", "gauge", &self.in_flight),
            ("toolgraph_tool_calls_total", "Tool API calls made by runs.", "counter", &self.tool_calls),
            ("toolgraph_tool_call_failures_total", "Tool API calls that failed.", "counter", &self.tool_call_failures),
            ("toolgraph_rate_limited_total", "Requests refused by a rate limit (429).", "counter", &self.rate_limited),
            ("toolgraph_busy_total", "Runs refused because the daemon was full (503).", "counter", &self.busy),
            (
                "toolgraph_connections_refused_total",
                "Connections closed at once: the connection limit was reached.",
                "counter",
                &self.connections_refused,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", v.load(Ordering::Relaxed));
        }
        out
    }
}
