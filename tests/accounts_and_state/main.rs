//! The multi-user service, on both state stores: SQLite (a file) and PostgreSQL (when
//! `TOOLGRAPH_TEST_POSTGRES_URL` is set — `scripts/test.sh` starts one — each test on a fresh
//! database). Users and roles, history that survives a restart, sessions shared by two daemons,
//! re-runs and user chains, tool credentials injected and never shown, approvals that pause runs
//! durably.

use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::state::{Role, StateStore};

#[path = "../common/daemon.rs"]
mod daemon_common;
use daemon_common::*;
#[path = "../common/mod.rs"]
mod common;

mod accounts;
mod approvals;
mod credentials;
mod errors;
mod mcp_caps;
mod runs;

/// Every log line of this test binary at debug level (the credentials test reads them).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        #[derive(Clone)]
        struct W(Arc<Mutex<Vec<u8>>>);
        impl Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let w = W(buf.clone());
        let _ = tracing_subscriber::fmt()
            .with_env_filter("debug")
            .with_ansi(false)
            .with_writer(move || w.clone())
            .try_init();
        buf
    })
    .clone()
}

/// The state stores to test on: a SQLite file, and a fresh PostgreSQL database when one is given.
async fn state_urls(dir: &std::path::Path, name: &str) -> Vec<String> {
    let mut urls = vec![format!("sqlite:{}", dir.join(format!("{name}.db")).display())];
    if let Ok(base) = std::env::var("TOOLGRAPH_TEST_POSTGRES_URL") {
        urls.push(common::fresh_postgres(&base, name).await);
    } else {
        eprintln!(
            "TOOLGRAPH_TEST_POSTGRES_URL is not set: {name} runs on SQLite only (scripts/test.sh starts a PostgreSQL)"
        );
    }
    urls
}

/// An admin, two users; their keys.
struct Keys {
    admin: String,
    ana: String,
    ben: String,
}

async fn users(st: &StateStore) -> Keys {
    let mut out = Vec::new();
    for (name, role) in [("root", Role::Admin), ("ana", Role::User), ("ben", Role::User)] {
        let u = st.add_user(name, role, None).await.unwrap();
        out.push(st.add_key(&u.id, "test", None).await.unwrap().1);
    }
    Keys { admin: out[0].clone(), ana: out[1].clone(), ben: out[2].clone() }
}

fn bearer(k: &str) -> String {
    format!("Bearer {k}")
}

async fn daemon_on(
    dir: &std::path::Path,
    state: Arc<StateStore>,
    keys: ApiKeys,
    tweak: impl FnOnce(&mut toolgraph_schema::Settings),
) -> (
    String,
    Arc<toolgraph_server::daemon::Daemon>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let b = empty_stack(dir, embedder(), exec_to(None, true), tweak).await;
    start_on(b, Some(state), keys).await
}

async fn get(http: &reqwest::Client, url: &str, key: &str) -> reqwest::Response {
    http.get(url).header("authorization", bearer(key)).send().await.unwrap()
}

async fn post(http: &reqwest::Client, url: &str, key: &str, body: Value) -> reqwest::Response {
    http.post(url).header("authorization", bearer(key)).json(&body).send().await.unwrap()
}

/// Poll a run until its status is not `running` / `awaiting_approval` (or `want`).
async fn wait_for(http: &reqwest::Client, base: &str, key: &str, run: &str, want: &str) -> Value {
    for _ in 0..400 {
        let r: Value = get(http, &format!("{base}/v1/runs/{run}"), key).await.json().await.unwrap();
        if r["status"] == want {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} never reached {want}");
}

/// An HTTP/1.1 server on 127.0.0.1 for the tests' own tools: each request's head (request line and
/// headers, as text) goes to `answer`, which gives (status line, content type, body).
async fn raw_http(
    answer: impl Fn(&str) -> (&'static str, &'static str, String) + Send + Sync + 'static,
) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let (status, content_type, body) = answer(&String::from_utf8_lossy(&buf));
                let resp = format!("HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    addr
}
