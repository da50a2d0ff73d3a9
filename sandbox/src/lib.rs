//! The replay sandbox: a real HTTP server that answers tool calls with recorded responses, keyed by
//! (API, normalized arguments). Routes are `/{host}{endpoint}` (the executor rewrites
//! `https://HOST/...` to `http://SANDBOX/HOST/...`); GET arguments come from the query string,
//! others from a JSON body.
//!
//! Lookup: the recording whose arguments equal the call's (normalized: strings trimmed and
//! lower-cased, numbers by value, JSON text parsed); failing that, the recording of that API whose
//! required arguments all equal the call's and which shares the most optional ones. Unknown calls
//! get the API's error shape (`{"status": false, "message": …}`, HTTP 200 as RapidAPI tools do);
//! unknown routes a 404 with that shape.
//!
//! Faults for tests: fixed latency, and per request (drawn from a seeded hash of the request
//! counter) timeouts (the response is held back past the client's limit), 5xx, 429 with
//! `Retry-After`, and malformed JSON.
//!
//! A crate of its own on hyper alone, so the evaluation and the tests start it without compiling
//! the daemon's stack (web framework, SQL, OpenTelemetry, MCP).

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Largest request body read (a tool call's JSON arguments), bytes.
const MAX_BODY: usize = 1 << 20;

type Reply = Response<Full<Bytes>>;

/// One recorded call: the API's route, its required parameters, the arguments (references
/// resolved) and the response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    pub api: String,
    /// `host/endpoint` without scheme, e.g. `booking-com15.p.rapidapi.com/api/v1/cars/searchDestination`.
    pub route: String,
    pub required: Vec<String>,
    pub arguments: Map<String, Value>,
    pub response: Value,
}

/// Injected faults; rates are probabilities per request, drawn in this order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Faults {
    pub latency_ms: u64,
    pub timeout_rate: f64,
    /// How long a "timed out" response is held back.
    pub hang_ms: u64,
    pub server_error_rate: f64,
    pub throttle_rate: f64,
    /// `Retry-After` seconds sent with 429s.
    pub retry_after_s: u64,
    pub garbage_rate: f64,
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Timeout,
    ServerError,
    Throttle,
    Garbage,
}

/// Canonical text of a value for matching: strings trimmed and lower-cased (JSON text inside a
/// string parsed first), numbers by value, containers recursively with sorted keys.
pub fn normalize(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let t = s.trim();
            if (t.starts_with('[') || t.starts_with('{')) && t.len() > 1 {
                if let Ok(inner) = serde_json::from_str::<Value>(t) {
                    return normalize(&inner);
                }
            }
            if let Ok(n) = t.parse::<f64>() {
                if n.is_finite() {
                    return format!("{n}");
                }
            }
            t.to_lowercase()
        }
        Value::Number(n) => n.as_f64().map(|f| format!("{f}")).unwrap_or_else(|| n.to_string()),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        Value::Array(a) => format!("[{}]", a.iter().map(normalize).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let sorted: BTreeMap<&String, String> = m.iter().map(|(k, v)| (k, normalize(v))).collect();
            format!("{{{}}}", sorted.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(","))
        }
    }
}

/// A call's arguments as recordings are keyed: each value normalized ([`normalize`]), nulls left out.
pub fn normalized_args(m: &Map<String, Value>) -> BTreeMap<String, String> {
    m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), normalize(v))).collect()
}

struct Entry {
    args: BTreeMap<String, String>,
    response: Arc<Value>,
}

struct ApiRecordings {
    api: String,
    required: Vec<String>,
    entries: Vec<Entry>,
}

/// Recordings by route.
#[derive(Default)]
pub struct Library {
    routes: HashMap<String, ApiRecordings>,
    recordings: usize,
}

impl Library {
    pub fn new(recordings: impl IntoIterator<Item = Recording>) -> Self {
        let mut lib = Library::default();
        for r in recordings {
            lib.add(r);
        }
        lib
    }

    pub fn add(&mut self, r: Recording) {
        let route = r.route.trim_start_matches('/').to_string();
        let slot = self.routes.entry(route).or_insert_with(|| ApiRecordings {
            api: r.api.clone(),
            required: r.required.clone(),
            entries: Vec::new(),
        });
        let args = normalized_args(&r.arguments);
        match slot.entries.iter_mut().find(|e| e.args == args) {
            // The same call recorded again: the later recording wins.
            Some(e) => e.response = Arc::new(r.response),
            None => {
                slot.entries.push(Entry { args, response: Arc::new(r.response) });
                self.recordings += 1;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.recordings
    }

    pub fn is_empty(&self) -> bool {
        self.recordings == 0
    }

    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    /// The recorded response for a call, or why there is none (the API name for known routes).
    pub fn lookup(&self, route: &str, args: &Map<String, Value>) -> std::result::Result<Arc<Value>, Option<String>> {
        self.answer(route, args).map(|(r, _)| r)
    }

    /// The recorded response for a call and how it was found: [`Match::Exact`] when a recording
    /// has exactly these arguments (normalized), [`Match::Nearest`] when it is the recording of
    /// the API with the same required arguments that shares the most optional ones — what the
    /// API would likely answer, not what it answered to these arguments.
    pub fn answer(
        &self,
        route: &str,
        args: &Map<String, Value>,
    ) -> std::result::Result<(Arc<Value>, Match), Option<String>> {
        let slot = self.routes.get(route.trim_start_matches('/')).ok_or(None)?;
        let want = normalized_args(args);
        if let Some(e) = slot.entries.iter().find(|e| e.args == want) {
            return Ok((e.response.clone(), Match::Exact));
        }
        let required_match =
            |e: &&Entry| slot.required.iter().all(|r| e.args.contains_key(r) && e.args.get(r) == want.get(r));
        let shared = |e: &Entry| e.args.iter().filter(|(k, v)| want.get(*k) == Some(*v)).count();
        slot.entries
            .iter()
            .filter(required_match)
            .max_by_key(|e| (shared(e), std::cmp::Reverse(e.args.len())))
            .map(|e| (e.response.clone(), Match::Nearest))
            .ok_or_else(|| Some(slot.api.clone()))
    }

    /// The response recorded for exactly these arguments (normalized), if any: what the real API
    /// answered to this call. Scoring trusts only these (a nearest answer never makes a call right).
    pub fn exact(&self, route: &str, args: &Map<String, Value>) -> Option<Arc<Value>> {
        match self.answer(route, args) {
            Ok((r, Match::Exact)) => Some(r),
            _ => None,
        }
    }
}

/// How the sandbox found a response (also sent as the `x-sandbox-match` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// Recorded for exactly these arguments.
    Exact,
    /// The nearest recording of the API: same required arguments, most optional ones shared.
    Nearest,
}

impl Match {
    pub fn as_str(self) -> &'static str {
        match self {
            Match::Exact => "exact",
            Match::Nearest => "nearest",
        }
    }
}

/// The header that says how a tool call's answer was found ([`Match`]).
pub const MATCH_HEADER: &str = "x-sandbox-match";

/// The sandbox's state: recordings, faults and counters.
pub struct Sandbox {
    library: Library,
    faults: Faults,
    counter: AtomicU64,
    served: AtomicU64,
    /// Of those served, answered by the nearest recording rather than an exact one.
    nearest: AtomicU64,
    missed: AtomicU64,
    faulted: AtomicU64,
    /// Route prefixes that are down: every request to them answers 503 (an outage to recover from).
    outages: std::sync::RwLock<std::collections::BTreeSet<String>>,
    /// A header every call must carry with this value (like RapidAPI's `X-RapidAPI-Key`); a call
    /// without it, or with another value, answers 401 and echoes what it got (as some real APIs
    /// do: the daemon must not let the echo reach a trace).
    required_header: std::sync::RwLock<Option<(String, String)>>,
    /// The recordings of the sample being replayed, answered first for exactly their arguments:
    /// ComplexFuncBench's runner answers a call that matches a golden call with *that sample's*
    /// recorded response, while the library keeps one response per call (the same call recorded
    /// by two samples, say coordinates in another precision, keeps the later).
    first: std::sync::RwLock<Library>,
    /// Each recorded sample's request and recordings, which `POST /_sandbox/sample` answers first.
    samples: std::sync::RwLock<Vec<(String, Vec<Recording>)>>,
}

/// `POST /_sandbox/sample`: answer one recorded sample's calls first (by its request or its
/// index), or none (`{}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SampleRequest {
    #[serde(default)]
    request: Option<String>,
    #[serde(default)]
    sample: Option<usize>,
}

/// `POST /_sandbox/outage`: take a route prefix down or bring it back.
#[derive(Debug, Deserialize)]
struct OutageRequest {
    route: String,
    down: bool,
}

/// Counters the sandbox exposes at `GET /_sandbox/stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxStats {
    pub requests: u64,
    pub served: u64,
    /// Of those served, answered by the nearest recording (not recorded for these arguments).
    #[serde(default)]
    pub nearest: u64,
    pub missed: u64,
    pub faulted: u64,
    pub recordings: usize,
    pub routes: usize,
}

impl Sandbox {
    pub fn new(library: Library, faults: Faults) -> Arc<Self> {
        Arc::new(Sandbox {
            library,
            faults,
            counter: AtomicU64::new(0),
            served: AtomicU64::new(0),
            nearest: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            faulted: AtomicU64::new(0),
            outages: Default::default(),
            required_header: Default::default(),
            first: Default::default(),
            samples: Default::default(),
        })
    }

    /// Answer calls that have exactly the arguments of one of these recordings with its response,
    /// before the library (the sample being replayed; an empty list stops it).
    pub fn answer_first(&self, recordings: impl IntoIterator<Item = Recording>) {
        *self.first.write().unwrap_or_else(|p| p.into_inner()) = Library::new(recordings);
    }

    /// The sample's own recording for exactly these arguments, else the library's answer.
    fn answer(
        &self,
        route: &str,
        args: &Map<String, Value>,
    ) -> std::result::Result<(Arc<Value>, Match), Option<String>> {
        let first = self.first.read().unwrap_or_else(|p| p.into_inner()).exact(route, args);
        match first {
            Some(v) => Ok((v, Match::Exact)),
            None => self.library.answer(route, args),
        }
    }

    /// The recorded samples (request, recordings) `POST /_sandbox/sample` may name.
    pub fn set_samples(&self, samples: Vec<(String, Vec<Recording>)>) {
        *self.samples.write().unwrap_or_else(|p| p.into_inner()) = samples;
    }

    /// Take every route starting with `route` (`/host/path`) down (`true`) or back up.
    pub fn set_outage(&self, route: &str, down: bool) {
        let mut o = self.outages.write().unwrap_or_else(|p| p.into_inner());
        if down {
            o.insert(route.to_string());
        } else {
            o.remove(route);
        }
    }

    /// Require `name: value` on every tool call (`None`: no key needed).
    pub fn require_header(&self, header: Option<(&str, &str)>) {
        *self.required_header.write().unwrap_or_else(|p| p.into_inner()) =
            header.map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()));
    }

    fn is_down(&self, path: &str) -> bool {
        self.outages.read().unwrap_or_else(|p| p.into_inner()).iter().any(|r| path.starts_with(r.as_str()))
    }

    pub fn stats(&self) -> SandboxStats {
        SandboxStats {
            requests: self.counter.load(Ordering::Relaxed),
            served: self.served.load(Ordering::Relaxed),
            nearest: self.nearest.load(Ordering::Relaxed),
            missed: self.missed.load(Ordering::Relaxed),
            faulted: self.faulted.load(Ordering::Relaxed),
            recordings: self.library.len(),
            routes: self.library.routes(),
        }
    }

    fn draw(&self, n: u64) -> Option<Fault> {
        let f = &self.faults;
        if f.timeout_rate + f.server_error_rate + f.throttle_rate + f.garbage_rate <= 0.0 {
            return None;
        }
        let h = Sha256::digest([f.seed.to_le_bytes(), n.to_le_bytes()].concat());
        let x = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]) as f64 / u64::MAX as f64;
        let mut acc = 0.0;
        for (rate, fault) in [
            (f.timeout_rate, Fault::Timeout),
            (f.server_error_rate, Fault::ServerError),
            (f.throttle_rate, Fault::Throttle),
            (f.garbage_rate, Fault::Garbage),
        ] {
            acc += rate;
            if x < acc {
                return Some(fault);
            }
        }
        None
    }
}

/// A response with `body` as `application/json`.
fn json_text(status: StatusCode, body: impl Into<Bytes>) -> Reply {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn json_response(status: StatusCode, v: &Value) -> Reply {
    json_text(status, v.to_string())
}

/// One request: its body read (at most [`MAX_BODY`]), its query string parsed, then answered.
async fn handle(sb: Arc<Sandbox>, req: Request<Incoming>) -> Reply {
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return json_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                &json!({"status": false, "message": format!("the body is larger than {MAX_BODY} bytes")}),
            )
        }
    };
    let query: HashMap<String, String> =
        parts.uri.query().map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    answer(&sb, &parts.method, parts.uri.path(), query, &parts.headers, &body).await
}

async fn answer(
    sb: &Sandbox,
    method: &Method,
    path: &str,
    query: HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Reply {
    let n = sb.counter.fetch_add(1, Ordering::Relaxed);
    if path == "/_sandbox/stats" {
        return json_response(StatusCode::OK, &serde_json::to_value(sb.stats()).unwrap_or_default());
    }
    if path == "/_sandbox/outage" && method == Method::POST {
        return match serde_json::from_slice::<OutageRequest>(body) {
            Ok(o) if o.route.starts_with('/') && o.route.len() <= 500 => {
                sb.set_outage(&o.route, o.down);
                json_response(StatusCode::OK, &json!({"route": o.route, "down": o.down}))
            }
            _ => json_response(
                StatusCode::BAD_REQUEST,
                &json!({"status": false, "message": "body: {\"route\": \"/host/path\" (at most 500 characters), \"down\": true|false}"}),
            ),
        };
    }
    if path == "/_sandbox/sample" && method == Method::POST {
        return sample_reply(sb, body);
    }
    let required = sb.required_header.read().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some((name, want)) = required {
        let got = headers.get(name.as_str()).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        if got != want {
            let message = if got.is_empty() {
                "Invalid API key. Go to https://docs.rapidapi.com/docs/keys for more info.".to_string()
            } else {
                format!("Invalid API key `{got}`. Go to https://docs.rapidapi.com/docs/keys for more info.")
            };
            return json_response(StatusCode::UNAUTHORIZED, &json!({"message": message}));
        }
    }
    if sb.is_down(path) {
        sb.faulted.fetch_add(1, Ordering::Relaxed);
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": false, "message": "service unavailable (outage injected)"}),
        );
    }
    if sb.faults.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(sb.faults.latency_ms)).await;
    }
    if let Some(fault) = sb.draw(n) {
        sb.faulted.fetch_add(1, Ordering::Relaxed);
        return match fault {
            Fault::Timeout => {
                tokio::time::sleep(Duration::from_millis(sb.faults.hang_ms.max(1))).await;
                json_response(StatusCode::GATEWAY_TIMEOUT, &json!({"message": "upstream timed out"}))
            }
            Fault::ServerError => {
                json_response(StatusCode::INTERNAL_SERVER_ERROR, &json!({"message": "internal error (injected)"}))
            }
            Fault::Throttle => {
                let mut r =
                    json_response(StatusCode::TOO_MANY_REQUESTS, &json!({"message": "Too many requests (injected)"}));
                if let Ok(v) = HeaderValue::from_str(&sb.faults.retry_after_s.to_string()) {
                    r.headers_mut().insert(header::RETRY_AFTER, v);
                }
                r
            }
            Fault::Garbage => json_text(StatusCode::OK, "{\"data\": [1, 2,, <html>"),
        };
    }
    let mut args: Map<String, Value> = query.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
    if method != Method::GET && !body.is_empty() {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => args.extend(m),
            _ => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &json!({"status": false, "message": "the body must be a JSON object"}),
                )
            }
        }
    }
    match sb.answer(path, &args) {
        Ok((v, how)) => {
            sb.served.fetch_add(1, Ordering::Relaxed);
            if how == Match::Nearest {
                sb.nearest.fetch_add(1, Ordering::Relaxed);
            }
            let mut r = json_response(StatusCode::OK, &v);
            r.headers_mut().insert(MATCH_HEADER, HeaderValue::from_static(how.as_str()));
            r
        }
        Err(Some(api)) => {
            sb.missed.fetch_add(1, Ordering::Relaxed);
            json_response(
                StatusCode::OK,
                &json!({"status": false, "message": format!("{api}: no result for these arguments"), "data": null}),
            )
        }
        Err(None) => {
            sb.missed.fetch_add(1, Ordering::Relaxed);
            json_response(
                StatusCode::NOT_FOUND,
                &json!({"status": false, "message": format!("Endpoint '{path}' does not exist")}),
            )
        }
    }
}

/// `POST /_sandbox/sample`: answer a recorded sample's calls first (see [`SampleRequest`]).
fn sample_reply(sb: &Sandbox, body: &Bytes) -> Reply {
    let pick = serde_json::from_slice::<SampleRequest>(body).ok().map(|q| {
        let samples = sb.samples.read().unwrap_or_else(|p| p.into_inner());
        let i = q
            .sample
            .or_else(|| samples.iter().position(|(r, _)| Some(r.trim()) == q.request.as_deref().map(str::trim)));
        (q.sample.is_none() && q.request.is_none(), i.and_then(|i| samples.get(i).map(|(_, rs)| (i, rs.clone()))))
    });
    match pick {
        Some((true, _)) => {
            sb.answer_first([]);
            json_response(StatusCode::OK, &json!({"sample": null}))
        }
        Some((false, Some((i, recordings)))) => {
            sb.answer_first(recordings);
            json_response(StatusCode::OK, &json!({"sample": i}))
        }
        _ => json_response(
            StatusCode::BAD_REQUEST,
            &json!({"status": false, "message": "body: {\"request\": \"a recorded request\"} or {\"sample\": INDEX} (of a recorded sample), or {} for none"}),
        ),
    }
}

/// Serve until `shutdown` resolves, then let the requests in flight finish. Every path is a tool
/// route, plus `GET /_sandbox/stats`, `POST /_sandbox/outage` and `POST /_sandbox/sample`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    sandbox: Arc<Sandbox>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!(target: "sandbox", error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let sb = sandbox.clone();
        let service = hyper::service::service_fn(move |req| {
            let sb = sb.clone();
            async move { Ok::<_, Infallible>(handle(sb, req).await) }
        });
        let conn =
            hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(target: "sandbox", error = %e, "connection ended with an error");
            }
        });
    }
    graceful.shutdown().await;
    Ok(())
}

/// Start on `addr` in the background; returns the bound address and a handle that stops it.
pub async fn spawn(
    addr: &str,
    sandbox: Arc<Sandbox>,
) -> std::io::Result<(std::net::SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        if let Err(e) = serve(listener, sandbox, async {
            let _ = rx.await;
        })
        .await
        {
            tracing::error!(target: "sandbox", error = %e, "sandbox stopped");
        }
    });
    Ok((local, tx))
}

#[cfg(test)]
mod tests;
