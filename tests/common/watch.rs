//! Bounds on a test's waits: a server that stops answering fails the test at the step it was at,
//! with its logs, instead of holding the whole suite until CI's own limit.

use std::path::Path;

/// How long one request of a test to a server of its own may take before the test fails at it.
pub const REQUEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(400);

/// An HTTP client whose every request ends within `limit`: a daemon that stops answering fails
/// the test at that request instead of holding the whole suite until CI's own limit.
pub fn http_client(limit: std::time::Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(limit).build().unwrap()
}

/// Run `body` on a thread of its own and wait at most `limit` for it. A body that panics fails the
/// test with its own panic; one still running at `limit` fails it with `diagnose()`'s account (the
/// step it was at, the servers' logs) instead of hanging the suite. `diagnose` should stop the
/// servers the body waits on, so that the body fails and drops what it started.
pub fn within<T: Send + 'static>(
    limit: std::time::Duration,
    body: impl FnOnce() -> T + Send + 'static,
    diagnose: impl FnOnce() -> String,
) -> T {
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let out = body();
        let _ = done.send(());
        out
    });
    match ended.recv_timeout(limit) {
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            let report = diagnose();
            // With its servers stopped the body fails soon: give it a minute to drop what it
            // started (its daemons, sandboxes), which would outlive the test process otherwise.
            match ended.recv_timeout(std::time::Duration::from_secs(60)) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => drop(worker.join()),
            }
            panic!("still running after {} s:\n{report}", limit.as_secs())
        }
        // Ended, or panicked (the sender dropped unsent): the worker's own outcome.
        _ => worker.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
    }
}

/// The last step a test reached (for [`within`]'s account of a hang).
#[derive(Clone, Default)]
pub struct Steps(std::sync::Arc<std::sync::Mutex<String>>);

impl Steps {
    pub fn at(&self, what: &str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = what.to_string();
    }
    pub fn last(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The last `n` lines of a log file (empty when there is none).
pub fn tail_of(path: &Path, n: usize) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
