//! Executing API calls for real over HTTP: arguments resolved (data flow between calls) and
//! validated against the API's parameter docs before anything is sent; per-call timeouts; retries
//! with backoff for transient failures, honouring `Retry-After` on 429/503; bounded response
//! bodies; long responses compressed for the planner while the full response stays in the trace.

mod compress;
pub mod credentials;
mod decode;
pub(crate) mod guard;
pub mod refs;

pub use compress::{compress, keep_set};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use toolgraph_schema::ParamDoc;

/// What to call: from an API node of the graph (or a registered tool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSpec {
    /// The API's id in the graph.
    pub api_id: String,
    /// The HTTP method.
    pub method: String,
    /// The URL, before rewrites.
    pub url: String,
    /// The documented parameters arguments are validated against.
    pub params: Vec<ParamDoc>,
}

impl CallSpec {
    /// The target of a graph node's API.
    pub fn from_node(n: &toolgraph_schema::ApiNode) -> Self {
        CallSpec {
            api_id: n.id.clone(),
            method: if n.method.is_empty() { "GET".into() } else { n.method.to_uppercase() },
            url: n.url.clone(),
            params: serde_json::from_str(&n.parameters).unwrap_or_default(),
        }
    }
}

pub use toolgraph_schema::ExecSettings;

/// One problem with the arguments of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgProblem {
    /// The argument's name.
    pub argument: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CallError {
    /// Names, required parameters or types are wrong; nothing was sent.
    InvalidArguments {
        /// Each argument that is wrong, and how.
        problems: Vec<ArgProblem>,
    },
    /// An argument references an output that does not exist; nothing was sent.
    UnresolvedReference {
        /// Which reference, and why.
        message: String,
    },
    /// Every attempt failed transiently (timeouts, 5xx, 429, malformed JSON, connection errors).
    Exhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The last attempt's error.
        last: String,
    },
    /// The server refused the call (4xx other than 429).
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The response body (bounded).
        body: String,
    },
    /// The URL cannot be called.
    BadRequest {
        /// Why.
        message: String,
    },
    /// A person refused the call (APIs that require approval); nothing was sent.
    NotApproved {
        /// Who refused.
        by: String,
        /// Why.
        reason: String,
    },
    /// The same call (API and arguments as they would be sent) already failed in this run; it is
    /// not sent again.
    Repeated {
        /// The earlier failure.
        earlier: String,
    },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::InvalidArguments { problems } => {
                let p: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.argument, p.problem)).collect();
                write!(f, "invalid arguments ({})", p.join("; "))
            }
            CallError::UnresolvedReference { message } => write!(f, "unresolved reference: {message}"),
            CallError::Exhausted { attempts, last } => write!(f, "failed after {attempts} attempts: {last}"),
            CallError::Rejected { status, body } => write!(f, "rejected with HTTP {status}: {body}"),
            CallError::BadRequest { message } => write!(f, "cannot call: {message}"),
            CallError::NotApproved { by, reason } => write!(f, "not approved by {by}: {reason}"),
            CallError::Repeated { earlier } => {
                write!(f, "not sent again: the same call failed earlier in this run ({earlier})")
            }
        }
    }
}

/// A successful call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallOutcome {
    /// The HTTP status of the response.
    pub status: u16,
    /// The response body (JSON, or the text as a string).
    pub response: Value,
    /// How many attempts it took.
    pub attempts: u32,
    /// Wall time of the call including retries, milliseconds.
    pub elapsed_ms: f64,
    /// The arguments as sent (references resolved, types coerced).
    pub arguments: Map<String, Value>,
}

/// The JSON kind of a documented parameter type (`NUMBER` → number, `ENUM` → string, …).
pub fn kind(ty: &str) -> &'static str {
    let t = ty.trim().to_ascii_lowercase();
    if t.starts_with("int") {
        "integer"
    } else if t.starts_with("number") || t.starts_with("float") || t.starts_with("double") {
        "number"
    } else if t.starts_with("bool") {
        "boolean"
    } else if t.starts_with("array") || t.starts_with("list") {
        "array"
    } else if t.starts_with("object") || t.starts_with("dict") {
        "object"
    } else {
        "string"
    }
}

/// Check `args` against the parameter docs: unknown names, missing required parameters, types.
/// Returns the arguments coerced to the declared types (numeric strings to numbers, "true" to
/// booleans; numbers to strings where a string is declared).
pub fn validate(params: &[ParamDoc], args: &Map<String, Value>) -> Result<Map<String, Value>, Vec<ArgProblem>> {
    let mut problems = Vec::new();
    let mut out = Map::new();
    let known: HashSet<&str> = params.iter().map(|p| p.name.as_str()).collect();
    for name in args.keys() {
        if !known.contains(name.as_str()) {
            let mut names: Vec<&str> = known.iter().copied().collect();
            names.sort_unstable();
            problems.push(ArgProblem {
                argument: name.clone(),
                problem: format!("unknown parameter (known: {})", names.join(", ")),
            });
        }
    }
    for p in params {
        let Some(v) = args.get(&p.name).filter(|v| !v.is_null()) else {
            if p.required {
                problems.push(ArgProblem { argument: p.name.clone(), problem: "required parameter missing".into() });
            }
            continue;
        };
        let want = kind(&p.ty);
        let coerced = match (want, v) {
            ("integer", Value::Number(n)) if n.is_i64() || n.is_u64() => Some(v.clone()),
            ("integer", Value::Number(n)) => n.as_f64().filter(|f| f.fract() == 0.0).map(|f| Value::from(f as i64)),
            ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
            ("number", Value::Number(_)) => Some(v.clone()),
            ("number", Value::String(s)) => {
                s.trim().parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number)
            }
            ("boolean", Value::Bool(_)) => Some(v.clone()),
            ("boolean", Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => Some(Value::Bool(true)),
                "false" | "0" => Some(Value::Bool(false)),
                _ => None,
            },
            ("array", Value::Array(_)) | ("object", Value::Object(_)) => Some(v.clone()),
            ("string", Value::String(_)) => Some(v.clone()),
            ("string", Value::Number(_) | Value::Bool(_)) => Some(Value::String(v.to_string())),
            _ => None,
        };
        match coerced {
            Some(c) => {
                out.insert(p.name.clone(), c);
            }
            None => problems.push(ArgProblem {
                argument: p.name.clone(),
                problem: format!("expected {want} (declared `{}`), got {v}", p.ty),
            }),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// A response that says it failed although the HTTP call succeeded (`{"status": false}`,
/// `{"error": ...}`, `{"message": ...}` with no data).
pub fn response_problem(v: &Value) -> Option<String> {
    let Value::Object(m) = v else { return None };
    if m.get("status") == Some(&Value::Bool(false)) || m.get("success") == Some(&Value::Bool(false)) {
        return Some(m.get("message").map(|x| x.to_string()).unwrap_or_else(|| "status false".into()));
    }
    match m.get("error") {
        Some(Value::Null) | None => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(e) => return Some(e.to_string()),
    }
    if m.len() == 1 && m.contains_key("message") {
        return Some(m["message"].to_string());
    }
    None
}

/// The scheme of APIs served by an MCP server: `mcp://SERVER/TOOL`.
pub const MCP_SCHEME: &str = "mcp://";

/// Why a remote (MCP) tool call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteError {
    /// Worth another attempt (the connection went away, the server is restarting, timed out).
    Transient(String),
    /// The tool answered with an error (`isError`), or the server refused the call.
    Failed(String),
    /// No such server.
    Unknown(String),
}

/// Tools reached through a protocol other than plain HTTP (MCP servers): the executor hands
/// `mcp://SERVER/TOOL` calls to this port; the daemon and the CLI plug in their MCP client.
#[async_trait::async_trait]
pub trait RemoteTools: Send + Sync {
    /// Sends one call to `target` with `arguments` (references already resolved).
    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> std::result::Result<Value, RemoteError>;
}

/// Executes calls with one HTTP client (connection reuse).
#[derive(Clone)]
pub struct Executor {
    client: reqwest::Client,
    settings: ExecSettings,
    guard: std::sync::Arc<guard::Guard>,
    /// Tool credentials (shared by every clone; replaced as a whole when they change).
    credentials: std::sync::Arc<std::sync::RwLock<std::sync::Arc<credentials::CredentialSet>>>,
    /// MCP servers' tools (shared by every clone).
    remote: std::sync::Arc<std::sync::RwLock<Option<std::sync::Arc<dyn RemoteTools>>>>,
}

fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = h.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    v.parse::<u64>()
        .ok()
        .map(Duration::from_secs)
        .or_else(|| v.parse::<f64>().ok().filter(|f| *f >= 0.0).map(Duration::from_secs_f64))
}

impl Executor {
    /// An executor with these timeouts, retries, limits and allow-list.
    pub fn new(settings: ExecSettings) -> crate::Result<Self> {
        let guard = std::sync::Arc::new(
            guard::Guard::new(&settings.allow_private)
                .map_err(|e| crate::EngineError::Config(format!("exec.allow_private: {e}")))?,
        );
        let client = reqwest::Client::builder()
            .dns_resolver(std::sync::Arc::new(guard::GuardedResolver(guard.clone())))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(settings.timeout_ms.max(1)))
            .connect_timeout(Duration::from_millis(settings.timeout_ms.clamp(1, 5_000)))
            .user_agent(concat!("toolgraph/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| crate::EngineError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Executor { client, settings, guard, credentials: Default::default(), remote: Default::default() })
    }

    /// Plug in the MCP client that `mcp://SERVER/TOOL` calls go to (every clone sees it).
    pub fn set_remote(&self, remote: std::sync::Arc<dyn RemoteTools>) {
        *self.remote.write().unwrap_or_else(|p| p.into_inner()) = Some(remote);
    }

    /// A call of an MCP server's tool: `tools/call` through the remote port, with the same
    /// retries and time limit as HTTP calls; `isError` fails the call.
    async fn call_remote(&self, spec: &CallSpec, valid: Map<String, Value>) -> Result<CallOutcome, CallError> {
        let rest = &spec.url[MCP_SCHEME.len()..];
        let (server, tool) = rest.split_once('/').filter(|(s, t)| !s.is_empty() && !t.is_empty()).ok_or_else(|| {
            CallError::BadRequest { message: format!("{}: `{}` is not mcp://SERVER/TOOL", spec.api_id, spec.url) }
        })?;
        let remote =
            self.remote.read().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(|| CallError::BadRequest {
                message: format!("{} is an MCP tool, but no MCP servers are connected here", spec.api_id),
            })?;
        let started = Instant::now();
        let mut last = String::new();
        let mut attempts = 0;
        for attempt in 0..=self.settings.retries {
            attempts = attempt + 1;
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(
                    self.settings.backoff_ms.saturating_mul(1 << (attempt - 1).min(6)),
                ))
                .await;
            }
            match remote.call(server, tool, valid.clone(), Duration::from_millis(self.settings.timeout_ms.max(1))).await
            {
                Ok(response) => {
                    return Ok(CallOutcome {
                        status: 200,
                        response,
                        attempts,
                        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
                        arguments: valid,
                    })
                }
                Err(RemoteError::Transient(m)) => last = m,
                Err(RemoteError::Failed(m)) => {
                    return Err(CallError::Rejected { status: 422, body: m.chars().take(2000).collect() })
                }
                Err(RemoteError::Unknown(m)) => return Err(CallError::BadRequest { message: m }),
            }
        }
        Err(CallError::Exhausted { attempts, last })
    }

    /// Its settings.
    pub fn settings(&self) -> &ExecSettings {
        &self.settings
    }

    /// The SSRF guard calls go through (also used to check URLs of tools being registered).
    pub fn guard(&self) -> &guard::Guard {
        &self.guard
    }

    /// Where a call to `url` really goes: the deployment's rewrites applied (the first that
    /// matches), as calls are sent. Registration checks this URL against the SSRF guard.
    pub fn rewritten(&self, url: &str) -> String {
        for (from, to) in &self.settings.rewrites {
            if let Some(rest) = url.strip_prefix(from.as_str()) {
                return format!("{to}{rest}");
            }
        }
        url.to_string()
    }

    /// Replace the tool credentials every clone of this executor injects.
    pub fn set_credentials(&self, set: credentials::CredentialSet) {
        *self.credentials.write().unwrap_or_else(|p| p.into_inner()) = std::sync::Arc::new(set);
    }

    /// The tool credentials in use.
    pub fn credentials(&self) -> std::sync::Arc<credentials::CredentialSet> {
        self.credentials.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The URL to send to, and the host of the API's own URL (path parameters filled, before
    /// deployment rewrites): the host credentials are bound to.
    fn url_of(&self, spec: &CallSpec, args: &mut Map<String, Value>) -> Result<(reqwest::Url, String), CallError> {
        let mut url = spec.url.clone();
        // Path parameters: `{name}` in the URL template, each value one percent-encoded segment.
        let names: Vec<String> = args.keys().filter(|k| url.contains(&format!("{{{k}}}"))).cloned().collect();
        for k in names {
            if let Some(v) = args.remove(&k) {
                let text = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                let segment = path_segment(&text).map_err(|problem| CallError::InvalidArguments {
                    problems: vec![ArgProblem { argument: k.clone(), problem }],
                })?;
                url = url.replace(&format!("{{{k}}}"), &segment);
            }
        }
        let own_host =
            reqwest::Url::parse(&url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase)).unwrap_or_default();
        for (from, to) in &self.settings.rewrites {
            if let Some(rest) = url.strip_prefix(from.as_str()) {
                url = format!("{to}{rest}");
                break;
            }
        }
        let parsed = reqwest::Url::parse(&url).map_err(|e| CallError::BadRequest {
            message: format!("URL `{}` of {}: {e}", url.split('?').next().unwrap_or_default(), spec.api_id),
        })?;
        Ok((parsed, own_host))
    }

    /// Resolve references, validate, then call with retries.
    /// `outputs`: earlier calls' responses by label (owned or borrowed).
    pub async fn call<V: std::borrow::Borrow<Value> + Sync>(
        &self,
        spec: &CallSpec,
        args: &Map<String, Value>,
        outputs: &std::collections::HashMap<String, V>,
    ) -> Result<CallOutcome, CallError> {
        let resolved =
            refs::resolve(args, outputs).map_err(|e| CallError::UnresolvedReference { message: e.to_string() })?;
        let valid = validate(&spec.params, &resolved).map_err(|problems| CallError::InvalidArguments { problems })?;
        if spec.url.starts_with(MCP_SCHEME) {
            return self.call_remote(spec, valid).await;
        }
        let started = Instant::now();
        let mut rest = valid.clone();
        let (url, own_host) = self.url_of(spec, &mut rest)?;
        self.guard
            .check_url(&url)
            .await
            .map_err(|message| CallError::BadRequest { message: format!("{} refused: {message}", spec.api_id) })?;
        let creds_set = self.credentials();
        let creds = creds_set.for_call(&spec.api_id, &own_host);
        let scrub = |s: String| if creds.is_empty() { s } else { credentials::scrub(&s, &creds) };
        let method = reqwest::Method::from_bytes(spec.method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut last = String::new();
        let mut attempts = 0;
        for attempt in 0..=self.settings.retries {
            attempts = attempt + 1;
            let mut req = self.client.request(method.clone(), url.clone());
            if method == reqwest::Method::GET || method == reqwest::Method::DELETE {
                let query: Vec<(String, String)> = rest
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            match v {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            },
                        )
                    })
                    .collect();
                req = req.query(&query);
            } else {
                req = req.json(&Value::Object(rest.clone()));
            }
            for c in &creds {
                use secrecy::ExposeSecret;
                req = match c.placement {
                    credentials::Placement::Header => {
                        match reqwest::header::HeaderValue::from_str(c.value.expose_secret()) {
                            Ok(mut v) => {
                                v.set_sensitive(true);
                                req.header(c.name.as_str(), v)
                            }
                            Err(_) => {
                                return Err(CallError::BadRequest {
                                    message: format!(
                                        "the credential {} of {} is not a valid header value",
                                        c.name, c.scope
                                    ),
                                })
                            }
                        }
                    }
                    credentials::Placement::Query => req.query(&[(c.name.as_str(), c.value.expose_secret())]),
                    credentials::Placement::Bearer => req.bearer_auth(c.value.expose_secret()),
                };
            }
            let mut wait = Duration::from_millis(self.settings.backoff_ms.saturating_mul(1 << attempt.min(10)));
            match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    if status.as_u16() == 429 || status.as_u16() == 503 {
                        if let Some(d) = retry_after(resp.headers()) {
                            wait = d.min(Duration::from_millis(self.settings.max_retry_after_ms));
                        }
                        last = format!("HTTP {status}");
                    } else if status.is_server_error() {
                        last = format!("HTTP {status}");
                    } else {
                        match read_bounded(resp, self.settings.max_response_bytes).await {
                            Ok(body) if status.is_client_error() => {
                                return Err(CallError::Rejected {
                                    status: status.as_u16(),
                                    body: scrub(String::from_utf8_lossy(&body).chars().take(500).collect()),
                                })
                            }
                            Ok(body) => match serde_json::from_slice::<Value>(&body) {
                                Ok(mut response) => {
                                    // A server that echoes a credential (in any usual encoding)
                                    // does not get it into the trace, the run or the planner.
                                    if !creds.is_empty() {
                                        credentials::scrub_value(&mut response, &creds);
                                    }
                                    return Ok(CallOutcome {
                                        status: status.as_u16(),
                                        response,
                                        attempts,
                                        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
                                        arguments: valid,
                                    });
                                }
                                Err(e) => last = format!("malformed JSON response: {e}"),
                            },
                            Err(e) => last = e,
                        }
                    }
                }
                Err(e) if e.is_timeout() => last = format!("timed out after {} ms", self.settings.timeout_ms),
                Err(e) => last = format!("request failed: {}", without_url(&e)),
            }
            if attempt < self.settings.retries {
                tokio::time::sleep(wait).await;
            }
        }
        Err(CallError::Exhausted { attempts, last: scrub(last) })
    }
}

/// A reqwest error's text without the URL (query strings may hold keys).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(u) = e.url() {
        s = s.replace(u.as_str(), "<url>");
    }
    s
}

async fn read_bounded(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    if resp.content_length().is_some_and(|n| n as usize > max) {
        return Err(format!("response larger than {max} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| format!("reading the response: {}", without_url(&e)))? {
        if body.len() + chunk.len() > max {
            return Err(format!("response larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A path parameter's value as exactly one URL path segment: every byte but the unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) percent-encoded, so `/`, a backslash, `?`, `#` and `%` cannot end
/// the segment, start a query or fragment, or be decoded into one. An empty value and the dot
/// segments `.` and `..` (which URL parsers resolve even when encoded) are refused.
pub fn path_segment(value: &str) -> Result<String, String> {
    if value.is_empty() || value == "." || value == ".." {
        return Err(format!("`{value}` cannot be a path segment"));
    }
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_path_parameter_stays_one_segment_whatever_its_value() {
        let exec = Executor::new(ExecSettings::default()).unwrap();
        let spec = CallSpec {
            api_id: "t/a".into(),
            method: "GET".into(),
            url: "http://tools.example.com/items/{id}/detail".into(),
            params: vec![],
        };
        let url_for = |id: &str| {
            let mut args = json!({"id": id, "apikey": "k"}).as_object().cloned().unwrap();
            exec.url_of(&spec, &mut args).map(|(u, _)| {
                (u.path().to_string(), u.query().map(str::to_string), u.fragment().map(str::to_string), args)
            })
        };
        let (path, query, fragment, rest) = url_for("..\\..\\admin").unwrap();
        assert_eq!(path, "/items/..%5C..%5Cadmin/detail");
        assert_eq!((query, fragment), (None, None));
        assert_eq!(
            rest,
            json!({"apikey": "k"}).as_object().cloned().unwrap(),
            "the path value leaves the arguments; the rest stay"
        );
        let (path, query, _, _) = url_for("x?injected=1&apikey=evil").unwrap();
        assert_eq!((path.as_str(), query), ("/items/x%3Finjected%3D1%26apikey%3Devil/detail", None));
        let (path, _, fragment, _) = url_for("x#frag").unwrap();
        assert_eq!((path.as_str(), fragment), ("/items/x%23frag/detail", None));
        assert_eq!(url_for("../../admin").unwrap().0, "/items/..%2F..%2Fadmin/detail");
        assert_eq!(url_for("100%").unwrap().0, "/items/100%25/detail");
        assert_eq!(url_for("Café Ñ").unwrap().0, "/items/Caf%C3%A9%20%C3%91/detail");
        for bad in ["..", ".", ""] {
            match url_for(bad) {
                Err(CallError::InvalidArguments { problems }) => assert_eq!(problems[0].argument, "id"),
                other => panic!("`{bad}` must be refused: {other:?}"),
            }
        }
    }

    fn p(name: &str, ty: &str, required: bool) -> ParamDoc {
        ParamDoc { name: name.into(), ty: ty.into(), description: String::new(), required, default: None }
    }

    #[test]
    fn validation_names_every_problem_and_coerces() {
        let params = vec![
            p("query", "string", true),
            p("page", "NUMBER", false),
            p("adults", "integer", false),
            p("sort", "ENUM", false),
            p("flag", "boolean", false),
        ];
        let ok = validate(
            &params,
            json!({"query": "Paris", "page": "2", "adults": 2.0, "flag": "true", "sort": 5}).as_object().unwrap(),
        )
        .unwrap();
        assert_eq!(ok["page"], json!(2.0));
        assert_eq!(ok["adults"], json!(2));
        assert_eq!(ok["flag"], json!(true));
        assert_eq!(ok["sort"], json!("5"));
        let errs = validate(&params, json!({"querry": "Paris", "adults": "two", "flag": [1]}).as_object().unwrap())
            .unwrap_err();
        let text = format!("{errs:?}");
        assert!(text.contains("querry") && text.contains("unknown parameter"), "{text}");
        assert!(text.contains("\"query\"") && text.contains("required parameter missing"), "{text}");
        assert!(text.contains("adults") && text.contains("expected integer"), "{text}");
        assert!(text.contains("flag") && text.contains("expected boolean"), "{text}");
        assert_eq!(errs.len(), 4);
    }

    #[test]
    fn error_shaped_responses_are_failures() {
        assert!(response_problem(&json!({"status": false, "message": "bad dest_id"})).is_some());
        assert!(response_problem(&json!({"error": "quota"})).is_some());
        assert!(response_problem(&json!({"message": "Endpoint does not exist"})).is_some());
        assert!(response_problem(&json!({"status": true, "data": []})).is_none());
        assert!(response_problem(&json!([{"id": 1}])).is_none());
        assert!(response_problem(&json!({"error": null, "data": 1})).is_none());
    }

    #[test]
    fn compression_keeps_what_matters_within_the_limit() {
        let hotels: Vec<Value> = (0..50)
            .map(|i| json!({"hotel_id": i, "name": format!("Hotel {i}"), "description": "x".repeat(300), "photos": ["a", "b"], "price": {"gross": 100 + i}}))
            .collect();
        let r = json!({"data": {"hotels": hotels, "meta": {"count": 50}}});
        assert!(r.to_string().len() > 1024);
        let keep = keep_set("hotels with a good price in Paris", ["dest_id", "hotel_id"]);
        let c = compress(&r, &keep, 1024);
        assert!(c.chars().count() <= 1024);
        assert!(c.contains("hotel_id") && c.contains("price") && c.contains("Hotel 0"), "{c}");
        assert!(!c.contains("xxxxxxxxxx"), "long irrelevant text goes first: {c}");
        let small = json!({"a": 1});
        assert_eq!(compress(&small, &keep, 1024), small.to_string());
    }
}
