//! The LLM planner: any OpenAI-compatible chat-completions endpoint, with JSON-schema constrained
//! answers (`response_format: json_schema`). Prompts are files (`engine/prompts/*.prompt.md`);
//! every answer is checked against the candidates, the API's parameters and the path before the
//! engine acts on it. An invalid answer is rejected (counted), asked again once with the reason,
//! and then replaced by the deterministic planner's decision — it is never executed.
//! Transient HTTP failures (timeouts, connection errors, 429, 5xx) are retried with backoff.

use super::answer::compose as plain_answer;
use super::decompose::subtasks_of;
use super::deterministic::DeterministicPlanner;
use super::fill::fill_arguments;
use super::judge::judge_path;
use super::program::{parse_plan, Plan, SolutionView};
use super::{ApiView, Candidate, Context, Decision, Filled, Judgement, Offer, Planner, ProviderPick, Subtask, Usage};
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use super::prompt::{
    approx_tokens, candidate_lines, compact_api, path_lines, render, render_answer, render_choose, render_decompose,
    render_fill, render_judge, render_plan, solution_lines, ANSWER, CHOOSE, DECISION_TOKENS, DECOMPOSE, FILL, JUDGE,
    PLAN, PLAN_TOKENS, SYSTEM,
};

/// Where and how to ask the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    /// The configured name (`[llm.models.NAME]`): usage is counted under it.
    #[serde(default)]
    pub name: String,
    /// Base URL of the OpenAI-compatible API, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    pub model: String,
    pub timeout_ms: u64,
    /// Retries after the first attempt for transient failures.
    pub retries: u32,
    pub max_tokens: u32,
    pub temperature: f64,
    #[serde(default)]
    pub top_p: Option<f64>,
    /// What the model decides.
    #[serde(default)]
    pub decides: Decides,
    /// Completions one run may ask (0: no limit); past it the deterministic planner decides.
    #[serde(default)]
    pub max_calls_per_run: u32,
}

/// What an LLM planner decides (`[llm.models.NAME] decides`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decides {
    /// Only what the graph, the learned filler and the rules leave open: a choice among
    /// candidates that score close, the arguments no rule fills, plan mode's program. The
    /// decomposition, the judge and the answer are the rules'.
    #[default]
    Open,
    /// Every decision.
    All,
}

impl Decides {
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "open" | "" => Ok(Decides::Open),
            "all" => Ok(Decides::All),
            other => Err(format!("`{other}` is not one of open, all")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Decides::Open => "open",
            Decides::All => "all",
        }
    }
}

impl Default for LlmSettings {
    fn default() -> Self {
        LlmSettings {
            name: String::new(),
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "local".into(),
            timeout_ms: 60_000,
            retries: 2,
            max_tokens: 512,
            temperature: 0.0,
            top_p: None,
            decides: Decides::Open,
            max_calls_per_run: 12,
        }
    }
}

impl LlmSettings {
    /// From a configured model (`decides` checked by [`super::models::Models::from_config`];
    /// anything else reads as `open`).
    pub fn of(name: &str, m: &toolgraph_schema::ModelSettings) -> Self {
        LlmSettings {
            name: name.to_string(),
            base_url: m.base_url.clone(),
            model: m.model.clone(),
            timeout_ms: m.timeout_ms,
            retries: m.retries,
            max_tokens: m.max_tokens,
            temperature: m.temperature,
            top_p: m.top_p,
            decides: Decides::parse(&m.decides).unwrap_or_default(),
            max_calls_per_run: m.max_calls_per_run,
        }
    }

    /// The name usage is counted under.
    pub fn label(&self) -> &str {
        if self.name.is_empty() {
            &self.model
        } else {
            &self.name
        }
    }
}

/// JSON schema of a plan.
pub fn plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "solution": {"type": ["integer", "null"]},
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": super::program::MAX_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "api": {"type": "string"},
                        "arguments": {"type": "object"},
                        "for_each": {"type": ["string", "null"]},
                        "if": {"type": ["object", "null"], "properties": {"ref": {"type": "string"}, "op": {"type": "string", "enum": ["exists", "nonempty", "eq", "ne", "gt", "lt"]}, "value": {}}, "required": ["ref", "op"]}
                    },
                    "required": ["api", "arguments"]
                }
            }
        },
        "required": ["steps"]
    })
}

/// JSON schema of a decomposition.
pub fn decompose_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "subtasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "category": {"type": ["string", "null"]}, "request": {"type": "string"}},
                    "required": ["name", "description", "category", "request"]
                }
            }
        },
        "required": ["subtasks"]
    })
}

/// Check a decomposition: 1 to 5 subtasks, each with a name and a non-empty rewritten request.
pub fn parse_subtasks(v: &Value) -> std::result::Result<Vec<Subtask>, String> {
    let items = v.get("subtasks").and_then(Value::as_array).ok_or("`subtasks` must be a list")?;
    if items.is_empty() || items.len() > 5 {
        return Err(format!("need 1 to 5 subtasks, got {}", items.len()));
    }
    let cut = |x: Option<&Value>, n: usize| {
        x.and_then(Value::as_str).map(|s| s.trim().chars().take(n).collect::<String>()).unwrap_or_default()
    };
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        // A bare string is a subtask too (older prompts, small models).
        if let Some(text) = it.as_str() {
            if text.trim().is_empty() {
                return Err(format!("subtask {i} is empty"));
            }
            out.push(Subtask::of_text(i, text.trim()));
            continue;
        }
        let request = cut(it.get("request"), 500);
        if request.is_empty() {
            return Err(format!("subtask {i} has no `request`"));
        }
        let name = cut(it.get("name"), 80);
        out.push(Subtask {
            name: if name.is_empty() { format!("subtask {}", i + 1) } else { name },
            description: cut(it.get("description"), 300),
            category: Some(cut(it.get("category"), 80)).filter(|c| !c.is_empty()),
            request,
        });
    }
    Ok(out)
}

/// JSON schema of a choice.
pub fn choose_schema(n: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["call", "finish", "backtrack", "give_up"]},
            "index": {"type": "integer", "minimum": 0, "maximum": n.saturating_sub(1)},
            "reason": {"type": "string"}
        },
        "required": ["action", "index", "reason"],
        "additionalProperties": false
    })
}

/// JSON schema of an API's arguments: declared types, or a string (a `$label.path$` reference).
pub fn arguments_schema(api: &ApiView) -> Value {
    let props: Map<String, Value> = api
        .params
        .iter()
        .map(|p| {
            let t = match crate::exec::kind(&p.ty) {
                "object" => "string",
                k => k,
            };
            let schema = if t == "string" { json!({"type": "string"}) } else { json!({"type": [t, "string"]}) };
            (p.name.clone(), schema)
        })
        .collect();
    json!({"type": "object", "properties": props, "additionalProperties": false})
}

/// JSON schema of a fill: the arguments with values, the parameters that come from another API's
/// output (Reverse Chain), and those only the user can give.
pub fn fill_schema(api: &ApiView) -> Value {
    json!({
        "type": "object",
        "properties": {
            "arguments": arguments_schema(api),
            "from_api": {"type": "array", "items": {"type": "object", "properties": {"param": {"type": "string"}, "api": {"type": "string"}, "field": {"type": "string"}}, "required": ["param", "api", "field"]}},
            "ask_user": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["arguments", "from_api", "ask_user"]
    })
}

pub fn judge_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pass": {"type": "boolean"},
            "grade": {"type": "number", "minimum": 0, "maximum": 1},
            "first_bad_step": {"type": ["integer", "null"]},
            "irrelevant_tools": {"type": "array", "items": {"type": "string"}},
            "missing": {"type": "array", "items": {"type": "string"}},
            "scores": {"type": "array", "items": {"type": "object", "properties": {"api": {"type": "string"}, "delta": {"type": "number", "minimum": -3, "maximum": 3}}, "required": ["api", "delta"]}},
            "reason": {"type": "string"}
        },
        "required": ["pass", "grade", "first_bad_step", "irrelevant_tools", "missing", "scores", "reason"]
    })
}

/// Check a choice against the candidates offered.
pub fn parse_choice(v: &Value, candidates: &[Candidate]) -> std::result::Result<Decision, String> {
    let action = v.get("action").and_then(Value::as_str).ok_or("`action` is missing")?;
    let reason = v.get("reason").and_then(Value::as_str).unwrap_or_default().chars().take(500).collect::<String>();
    match action {
        "call" => {
            let index =
                v.get("index").and_then(Value::as_u64).ok_or("`index` must be a non-negative integer")? as usize;
            if index >= candidates.len() {
                return Err(format!("index {index} is not one of the {} candidates", candidates.len()));
            }
            Ok(Decision::Call { index, reason })
        }
        "finish" => Ok(Decision::Finish { reason }),
        "backtrack" => Ok(Decision::Backtrack { reason }),
        "give_up" => Ok(Decision::GiveUp { reason }),
        other => Err(format!("unknown action `{other}`")),
    }
}

/// Check a fill: only known parameters; every required one has a value, a provider among those
/// offered for it, or is asked of the user; references name earlier steps; no identifier is
/// invented (an id-like value must appear in the request, the user's values or an earlier output).
pub fn parse_fill(v: &Value, api: &ApiView, ctx: &Context, offers: &[Offer]) -> std::result::Result<Filled, String> {
    let m = v.get("arguments").and_then(Value::as_object).ok_or("`arguments` must be a JSON object")?;
    let known: HashSet<&str> = api.params.iter().map(|p| p.name.as_str()).collect();
    let mut problems = Vec::new();
    for k in m.keys() {
        if !known.contains(k.as_str()) {
            problems.push(format!("`{k}` is not a parameter of {}", api.name));
        }
    }
    let labels: HashSet<&str> = ctx.path.iter().map(|s| s.label.as_str()).collect();
    let mut f = Filled::default();
    for (k, val) in m.iter().filter(|(_, v)| !v.is_null()) {
        if let Some(t) = val.as_str() {
            for r in crate::exec::refs::references(t) {
                let l = r.split('.').next().unwrap_or_default();
                if !labels.contains(l) {
                    problems.push(format!("`{k}` references `{l}`, which is no earlier output"));
                }
            }
        }
        if let Some(why) = super::program::invented_id(ctx, k, val) {
            problems.push(why);
        }
        f.arguments.insert(k.clone(), val.clone());
    }
    for p in v.get("from_api").and_then(Value::as_array).into_iter().flatten() {
        let param = p.get("param").and_then(Value::as_str).unwrap_or_default();
        let name = p.get("api").and_then(Value::as_str).unwrap_or_default();
        let field = p.get("field").and_then(Value::as_str).unwrap_or_default();
        if f.arguments.contains_key(param) {
            continue;
        }
        let offered = offers
            .iter()
            .find(|o| o.param == param)
            .and_then(|o| o.providers.iter().find(|a| a.name == name || a.id == name));
        match offered {
            Some(a) => f.from_api.push(ProviderPick {
                param: param.to_string(),
                api: a.id.clone(),
                field: field.chars().take(200).collect(),
            }),
            None => problems.push(format!("`{name}` is not an API offered for `{param}`")),
        }
    }
    for p in v.get("ask_user").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if known.contains(p) && !f.arguments.contains_key(p) && !f.from_api.iter().any(|x| x.param == p) {
            f.ask_user.push(p.to_string());
        }
    }
    for p in api.params.iter().filter(|p| p.required) {
        let answered = f.arguments.contains_key(&p.name)
            || f.from_api.iter().any(|x| x.param == p.name)
            || f.ask_user.contains(&p.name);
        if !answered {
            problems.push(format!("required `{}` has no value, no provider and is not asked of the user", p.name));
        } else if !f.arguments.contains_key(&p.name) {
            f.missing.push(p.name.clone());
        }
    }
    if problems.is_empty() {
        Ok(f)
    } else {
        Err(problems.join("; "))
    }
}

/// Check a judgement against the path.
pub fn parse_judgement(v: &Value, ctx: &Context) -> std::result::Result<Judgement, String> {
    let pass = v.get("pass").and_then(Value::as_bool).ok_or("`pass` must be a boolean")?;
    let grade = v.get("grade").and_then(Value::as_f64).ok_or("`grade` must be a number")?;
    if !(0.0..=1.0).contains(&grade) {
        return Err(format!("grade {grade} is outside [0, 1]"));
    }
    let first_bad_step = match v.get("first_bad_step") {
        None | Some(Value::Null) => None,
        Some(x) => {
            let i = x.as_u64().ok_or("`first_bad_step` must be an integer or null")? as usize;
            if i >= ctx.path.len() {
                return Err(format!("first_bad_step {i} is past the {} steps", ctx.path.len()));
            }
            Some(i)
        }
    };
    let tools: HashSet<&str> = ctx.path.iter().map(|s| s.api.tool.as_str()).collect();
    let irrelevant: Vec<String> = v
        .get("irrelevant_tools")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if let Some(t) = irrelevant.iter().find(|t| !tools.contains(t.as_str())) {
        return Err(format!("irrelevant tool `{t}` was not called"));
    }
    let mut deltas = Vec::new();
    for s in v.get("scores").and_then(Value::as_array).into_iter().flatten() {
        let name = s.get("api").and_then(Value::as_str).ok_or("each score needs `api`")?;
        let delta = s.get("delta").and_then(Value::as_f64).ok_or("each score needs a numeric `delta`")?;
        if !(-3.0..=3.0).contains(&delta) {
            return Err(format!("delta {delta} for `{name}` is outside [-3, 3]"));
        }
        let step = ctx
            .path
            .iter()
            .find(|st| st.api.name == name || st.api.id == name)
            .ok_or_else(|| format!("scored API `{name}` was not called"))?;
        deltas.push((step.api.id.clone(), delta));
    }
    // Parts of the request the model says no call served; the deterministic coverage checks join
    // them, and the path passes only when both find nothing missing.
    let mut coverage: Vec<super::coverage::Requirement> = v
        .get("missing")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
        .take(10)
        .map(|m| super::coverage::Requirement {
            kind: super::coverage::Kind::Judged,
            value: m.chars().take(200).collect(),
            covered_by: None,
        })
        .collect();
    coverage.extend(super::coverage::assess(ctx));
    let pass = pass && super::coverage::complete(&coverage);
    Ok(Judgement {
        pass,
        grade,
        first_bad_step,
        irrelevant_tools: irrelevant,
        deltas,
        reason: v.get("reason").and_then(Value::as_str).unwrap_or_default().chars().take(500).collect(),
        coverage,
    })
}

/// At most this many candidates are offered to a model deciding what is open.
pub const CLOSE_CANDIDATES: usize = 4;
/// A candidate scoring at least this share of the deterministic choice's score is close to it.
pub const CLOSE_RATIO: f64 = 0.75;

/// The API candidates scoring within [`CLOSE_RATIO`] of the deterministic choice `chosen` (it first), at
/// most [`CLOSE_CANDIDATES`]: what is left open for a model to choose among. `END` is the
/// deterministic planner's to choose.
pub fn close_candidates(
    det: &DeterministicPlanner,
    ctx: &Context,
    candidates: &[Candidate],
    chosen: usize,
) -> Vec<usize> {
    let best = det.score(ctx, &candidates[chosen]);
    let mut close: Vec<(usize, f64)> = candidates
        .iter()
        .enumerate()
        .filter(|(i, c)| *i != chosen && !c.is_end())
        .map(|(i, c)| (i, det.score(ctx, c)))
        .filter(|(_, s)| *s >= best * CLOSE_RATIO)
        .collect();
    close.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    std::iter::once(chosen).chain(close.into_iter().map(|(i, _)| i)).take(CLOSE_CANDIDATES).collect()
}

/// The OpenAI-compatible planner.
pub struct LlmPlanner {
    /// Tool categories the decomposition may name (from the graph).
    categories: Vec<String>,
    client: reqwest::Client,
    settings: LlmSettings,
    key: Option<SecretString>,
    fallback: DeterministicPlanner,
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    rejected: AtomicU64,
}

impl LlmPlanner {
    /// `key` from `TOOLGRAPH_LLM_API_KEY(_FILE)`; never logged.
    pub fn new(settings: LlmSettings, key: Option<SecretString>) -> Result<Self> {
        if !(settings.base_url.starts_with("http://") || settings.base_url.starts_with("https://")) {
            return Err(EngineError::Config(format!(
                "llm.base_url must be an http(s) URL, got `{}`",
                settings.base_url
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(settings.timeout_ms.max(1)))
            .build()
            .map_err(|e| EngineError::Config(format!("cannot build the LLM HTTP client: {e}")))?;
        Ok(LlmPlanner {
            categories: Vec::new(),
            client,
            settings,
            key,
            fallback: DeterministicPlanner::default(),
            calls: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        })
    }

    /// The tool categories a decomposition may name (the graph's).
    pub fn with_categories(mut self, categories: Vec<String>) -> Self {
        self.categories = categories.into_iter().take(200).collect();
        self
    }

    pub fn settings(&self) -> &LlmSettings {
        &self.settings
    }

    /// One constrained completion: the parsed JSON content of the first choice.
    pub async fn complete(&self, name: &str, user: &str, schema: Value) -> Result<Value> {
        let body = json!({
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
            "response_format": {"type": "json_schema", "json_schema": {"name": name, "strict": true, "schema": schema}},
        });
        let v = self.chat(body).await?;
        let content = v.pointer("/choices/0/message/content").and_then(Value::as_str).unwrap_or_default();
        Ok(serde_json::from_str(content.trim()).unwrap_or(Value::String(content.to_string())))
    }

    /// One chat completion of `body` (its `messages`, and `tools`, `response_format` … as the
    /// caller sets them; the model, temperature, top_p and max_tokens are this model's unless
    /// `body` sets them): the whole completion. Transient failures are retried; calls, tokens and
    /// time are counted into the planner's and the current run's usage.
    pub async fn chat(&self, mut body: Value) -> Result<Value> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(b) = body.as_object_mut() {
            b.entry("model").or_insert_with(|| json!(self.settings.model));
            b.entry("temperature").or_insert_with(|| json!(self.settings.temperature));
            b.entry("max_tokens").or_insert_with(|| json!(self.settings.max_tokens));
            if let Some(p) = self.settings.top_p {
                b.entry("top_p").or_insert_with(|| json!(p));
            }
        }
        let label = self.settings.label().to_string();
        let started = std::time::Instant::now();
        // Counted into the run's usage: a completion (tokens) or the time a failed one took.
        let count = |calls: u64, prompt: u64, completion: u64| {
            let ms = started.elapsed().as_millis() as u64;
            let _ = super::RUN_USAGE.try_with(|u| {
                let mut u = u.lock().unwrap_or_else(|p| p.into_inner());
                let e = u.entry(label.clone()).or_default();
                e.calls += calls;
                e.prompt_tokens += prompt;
                e.completion_tokens += completion;
                e.ms += ms;
            });
        };
        let url = format!("{}/chat/completions", self.settings.base_url.trim_end_matches('/'));
        let mut last = String::new();
        for attempt in 0..=self.settings.retries {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 * (1 << attempt.min(6)))).await;
            }
            let mut req = self.client.post(&url).json(&body);
            if let Some(k) = &self.key {
                req = req.bearer_auth(k.expose_secret());
            }
            let resp = match req.send().await {
                Ok(r) => r,
                Err(e) => {
                    last = if e.is_timeout() { "timed out".into() } else { "connection failed".into() };
                    continue;
                }
            };
            let status = resp.status();
            if status.as_u16() == 429 || status.is_server_error() {
                last = format!("HTTP {status}");
                continue;
            }
            let text = resp
                .text()
                .await
                .map_err(|_| EngineError::service("llm", ErrorClass::Transient, "reading the response failed"))?;
            if !status.is_success() {
                count(0, 0, 0);
                return Err(EngineError::service(
                    "llm",
                    ErrorClass::Permanent,
                    format!("HTTP {status}: {}", text.chars().take(300).collect::<String>()),
                ));
            }
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                EngineError::service("llm", ErrorClass::Permanent, format!("not a chat completion: {e}"))
            })?;
            let (pt, ct) = v
                .get("usage")
                .map(|u| {
                    (
                        u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
                        u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
                    )
                })
                .unwrap_or((0, 0));
            self.prompt_tokens.fetch_add(pt, Ordering::Relaxed);
            self.completion_tokens.fetch_add(ct, Ordering::Relaxed);
            count(1, pt, ct);
            return Ok(v);
        }
        count(0, 0, 0);
        Err(EngineError::service(
            "llm",
            ErrorClass::Transient,
            format!("{} failed after {} attempts: {last}", self.settings.base_url, self.settings.retries + 1),
        ))
    }

    /// Whether the current run has asked this model its `max_calls_per_run` completions.
    fn run_limit_reached(&self) -> bool {
        let limit = self.settings.max_calls_per_run as u64;
        limit > 0
            && super::RUN_USAGE
                .try_with(|u| {
                    u.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(self.settings.label())
                        .is_some_and(|m| m.calls >= limit)
                })
                .unwrap_or(false)
    }

    /// Ask, validate, ask once more with the problem, else `None` (the caller falls back).
    async fn ask_valid<T>(
        &self,
        name: &str,
        prompt: &str,
        schema: Value,
        check: impl Fn(&Value) -> std::result::Result<T, String>,
    ) -> Result<Option<T>> {
        let mut prompt = prompt.to_string();
        for _ in 0..2 {
            if self.run_limit_reached() {
                tracing::debug!(target: "plan.llm", prompt = name, limit = self.settings.max_calls_per_run, "the run's completions are spent: the rules decide");
                return Ok(None);
            }
            let v = self.complete(name, &prompt, schema.clone()).await?;
            match check(&v) {
                Ok(t) => return Ok(Some(t)),
                Err(problem) => {
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(target: "plan.llm", prompt = name, %problem, "rejected an invalid answer");
                    prompt = format!("{prompt}\n\nYour previous answer {v} was rejected: {problem}. Answer again.");
                }
            }
        }
        Ok(None)
    }
}

#[async_trait]
impl Planner for LlmPlanner {
    fn name(&self) -> &'static str {
        "llm"
    }

    async fn decompose(&self, ctx: &Context) -> Result<Vec<Subtask>> {
        if self.settings.decides == Decides::Open {
            return Ok(subtasks_of(&ctx.request));
        }
        let prompt = render_decompose(ctx, &self.categories);
        let got = self.ask_valid("decompose", &prompt, decompose_schema(), parse_subtasks).await?;
        Ok(got.unwrap_or_else(|| subtasks_of(&ctx.request)))
    }

    async fn choose(&self, ctx: &Context, candidates: &[Candidate]) -> Result<Decision> {
        if candidates.is_empty() {
            return self.fallback.choose(ctx, candidates).await;
        }
        // Deciding what is open: the deterministic choice stands unless other API candidates
        // score close to it; the model then chooses among those few only.
        let (offered, index_of): (Vec<Candidate>, Vec<usize>) = match self.settings.decides {
            Decides::All => (candidates.to_vec(), (0..candidates.len()).collect()),
            Decides::Open => {
                let d = self.fallback.choose(ctx, candidates).await?;
                let Decision::Call { index, .. } = &d else { return Ok(d) };
                let close = close_candidates(&self.fallback, ctx, candidates, *index);
                if close.len() < 2 {
                    return Ok(d);
                }
                (close.iter().map(|&i| candidates[i].clone()).collect(), close)
            }
        };
        match self
            .ask_valid("choose", &render_choose(ctx, &offered), choose_schema(offered.len()), |v| {
                parse_choice(v, &offered)
            })
            .await?
        {
            Some(Decision::Call { index, reason }) => Ok(Decision::Call { index: index_of[index], reason }),
            Some(d) => Ok(d),
            None => {
                let d = self.fallback.choose(ctx, candidates).await?;
                Ok(match d {
                    Decision::Call { index, reason } => {
                        Decision::Call { index, reason: format!("model answers were invalid; deterministic: {reason}") }
                    }
                    other => other,
                })
            }
        }
    }

    async fn fill(&self, ctx: &Context, api: &ApiView, offers: &[Offer]) -> Result<Filled> {
        let base = fill_arguments(ctx, api);
        // Deciding what is open: only the parameters the shared filler left open are asked,
        // the rest stays as it filled them.
        let (view, filled) = match self.settings.decides {
            Decides::All => (api.clone(), Map::new()),
            Decides::Open => {
                if base.missing.is_empty() {
                    return Ok(base);
                }
                let mut v = api.clone();
                v.params.retain(|p| base.missing.contains(&p.name));
                (v, base.arguments.clone())
            }
        };
        let got = self
            .ask_valid("fill", &render_fill(ctx, api, offers, &filled), fill_schema(&view), |v| {
                parse_fill(v, &view, ctx, offers)
            })
            .await?;
        Ok(match got {
            Some(mut f) => {
                for (k, v) in &f.arguments {
                    let source = super::ArgSource::of_reference(v)
                        .unwrap_or_else(|| base.sources.get(k).cloned().unwrap_or(super::ArgSource::Given));
                    f.sources.insert(k.clone(), source);
                }
                for (k, v) in filled {
                    f.arguments.entry(k.clone()).or_insert(v);
                    if let Some(src) = base.sources.get(&k) {
                        f.sources.entry(k).or_insert_with(|| src.clone());
                    }
                }
                f
            }
            None => base,
        })
    }

    fn wants_offers(&self) -> bool {
        true
    }

    async fn plan(&self, ctx: &Context, solutions: &[SolutionView]) -> Result<Option<Plan>> {
        if solutions.is_empty() {
            return Ok(None);
        }
        let mut offered: Vec<std::sync::Arc<ApiView>> = Vec::new();
        for a in solutions.iter().flat_map(|s| s.apis.iter()) {
            if !offered.iter().any(|o| o.id == a.id) {
                offered.push(a.clone());
            }
        }
        let got = self
            .ask_valid("plan", &render_plan(ctx, solutions), plan_schema(), |v| parse_plan(v, ctx, &offered, "llm"))
            .await?;
        Ok(match got {
            Some(mut p) => {
                p.solution = p.solution.and_then(|i| solutions.get(i)).map(|s| s.index);
                Some(p)
            }
            // Both answers invalid: the deterministic plan (never an unchecked one).
            None => self.fallback.plan(ctx, solutions).await?,
        })
    }

    async fn judge(&self, ctx: &Context) -> Result<Judgement> {
        if ctx.path.is_empty() || self.settings.decides == Decides::Open {
            return Ok(judge_path(ctx));
        }
        Ok(self
            .ask_valid("judge", &render_judge(ctx), judge_schema(), |v| parse_judgement(v, ctx))
            .await?
            .unwrap_or_else(|| judge_path(ctx)))
    }

    async fn answer(&self, ctx: &Context) -> Result<String> {
        if self.settings.decides == Decides::Open {
            return Ok(plain_answer(ctx));
        }
        let schema = json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]});
        let prompt = render_answer(ctx);
        let got = self
            .ask_valid("answer", &prompt, schema, |v| {
                v.get("answer")
                    .and_then(Value::as_str)
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| s.chars().take(4000).collect::<String>())
                    .ok_or_else(|| "`answer` must be a non-empty string".to_string())
            })
            .await?;
        Ok(got.unwrap_or_else(|| plain_answer(ctx)))
    }

    fn composes_answers(&self) -> bool {
        self.settings.decides == Decides::Open
    }

    fn as_llm(&self) -> Option<&LlmPlanner> {
        Some(self)
    }

    fn usage(&self) -> Usage {
        Usage {
            calls: self.calls.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Source;
    use std::sync::Arc;

    fn cand(n: usize) -> Vec<Candidate> {
        (0..n)
            .map(|i| Candidate {
                id: format!("a{i}"),
                source: Source::Graph,
                weight: 0.5,
                similarity: 0.5,
                hint: 0.0,
                api: None,
            })
            .collect()
    }

    #[test]
    fn invalid_choices_are_rejected() {
        let c = cand(2);
        assert!(parse_choice(&json!({"action": "call", "index": 5, "reason": ""}), &c)
            .unwrap_err()
            .contains("not one of the 2"));
        assert!(parse_choice(&json!({"action": "fly", "index": 0}), &c).is_err());
        assert!(parse_choice(&json!("call 0"), &c).is_err());
        assert_eq!(
            parse_choice(&json!({"action": "call", "index": 1, "reason": "r"}), &c).unwrap(),
            Decision::Call { index: 1, reason: "r".into() }
        );
    }

    #[test]
    fn invalid_arguments_and_judgements_are_rejected() {
        let api = ApiView {
            id: "c/t/a".into(),
            name: "a".into(),
            tool: "t".into(),
            category: "c".into(),
            description: String::new(),
            params: vec![toolgraph_schema::ParamDoc {
                name: "q".into(),
                ty: "string".into(),
                description: String::new(),
                required: true,
                default: None,
            }],
            output_fields: vec![],
            availability: None,
            ends: None,
        };
        let mut ctx = Context::new("r", Default::default());
        let fill = |v: Value, ctx: &Context| {
            parse_fill(&json!({"arguments": v, "from_api": [], "ask_user": []}), &api, ctx, &[])
        };
        assert!(fill(json!({"x": 1}), &ctx).unwrap_err().contains("`x` is not a parameter"));
        assert!(fill(json!({}), &ctx).unwrap_err().contains("required `q` has no value"));
        assert_eq!(fill(json!({"q": "Rome"}), &ctx).unwrap().arguments["q"], json!("Rome"));
        assert!(fill(json!({"q": "$var9.x$"}), &ctx).unwrap_err().contains("no earlier output"));
        let asked = parse_fill(&json!({"arguments": {}, "from_api": [], "ask_user": ["q"]}), &api, &ctx, &[]).unwrap();
        assert_eq!((asked.missing.clone(), asked.ask_user.clone()), (vec!["q".to_string()], vec!["q".to_string()]));
        ctx.path.push(super::super::Step {
            api: Arc::new(api),
            label: "var1".into(),
            arguments: Map::new(),
            sources: Default::default(),
            observation: String::new(),
            response: json!({}).into(),
            repeat: 0,
        });
        let ok = json!({"pass": true, "grade": 1.0, "first_bad_step": null, "irrelevant_tools": [], "scores": [{"api": "a", "delta": 2}], "reason": "ok"});
        assert_eq!(parse_judgement(&ok, &ctx).unwrap().deltas, vec![("c/t/a".to_string(), 2.0)]);
        let bad = json!({"pass": true, "grade": 1.0, "first_bad_step": null, "irrelevant_tools": [], "scores": [{"api": "zzz", "delta": 2}], "reason": ""});
        assert!(parse_judgement(&bad, &ctx).unwrap_err().contains("was not called"));
        let bad = json!({"pass": true, "grade": 1.0, "first_bad_step": 3, "irrelevant_tools": [], "scores": [], "reason": ""});
        assert!(parse_judgement(&bad, &ctx).is_err());
        let bad = json!({"pass": true, "grade": 1.0, "first_bad_step": null, "irrelevant_tools": [], "scores": [{"api": "a", "delta": 7}], "reason": ""});
        assert!(parse_judgement(&bad, &ctx).unwrap_err().contains("outside [-3, 3]"));
    }

    #[test]
    fn rendering_is_one_pass() {
        let r = render(
            "Request: {{request}}\nNotes: {{notes}} {{other}}",
            &[("request", "ignore {{notes}} now"), ("notes", "n1")],
        );
        assert_eq!(r, "Request: ignore {{notes}} now\nNotes: n1 {{other}}");
    }

    #[test]
    fn bad_base_url_is_a_config_error() {
        assert!(LlmPlanner::new(LlmSettings { base_url: "ftp://x".into(), ..Default::default() }, None).is_err());
    }
}
