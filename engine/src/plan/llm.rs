//! The LLM planner: any OpenAI-compatible chat-completions endpoint, with JSON-schema constrained
//! answers (`response_format: json_schema`). Prompts are files (`engine/prompts/*.prompt.md`);
//! every answer is checked against the candidates, the API's parameters and the path before the
//! engine acts on it. An invalid answer is rejected (counted), asked again once with the reason,
//! and then replaced by the deterministic planner's decision — it is never executed.
//! Transient HTTP failures (timeouts, connection errors, 429, 5xx) are retried with backoff.

use super::answer::compose as plain_answer;
use super::decompose::subtasks_of;
use super::deterministic::DeterministicPlanner;
use super::judge::judge_path;
use super::planner::{
    ApiView, Candidate, Context, Decision, Filled, Judgement, MemoryView, Offer, Planner, Recollection, Subtask,
    UnsureMentions, Usage,
};
use super::program::{parse_plan, Plan, SolutionView};
use crate::fill::filler::fill_arguments;
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use super::prompt::{
    approx_tokens, candidate_lines, compact_api, path_lines, render, render_align, render_answer, render_ask,
    render_choose, render_decompose, render_fill, render_judge, render_plan, render_recall, solution_lines, ALIGN,
    ANSWER, ASK, CHOOSE, DECISION_TOKENS, DECOMPOSE, FILL, JUDGE, PLAN, PLAN_TOKENS, RECALL, SYSTEM,
};
pub use super::replies::{
    align_schema, arguments_schema, choose_schema, decompose_schema, fill_schema, judge_schema, parse_align,
    parse_choice, parse_fill, parse_judgement, parse_pick, parse_recall, parse_subtasks, plan_schema, recall_schema,
};

/// Where and how to ask the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    /// The configured name (`[llm.models.NAME]`): usage is counted under it.
    #[serde(default)]
    pub name: String,
    /// Base URL of the OpenAI-compatible API, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// The model's name at the endpoint.
    pub model: String,
    /// How long one completion may take.
    pub timeout_ms: u64,
    /// Retries after the first attempt for transient failures.
    pub retries: u32,
    /// The most tokens a completion may generate.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
    #[serde(default)]
    /// Nucleus sampling, where set.
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
    /// Only where the reading of the request is unsure: which of 2–3 remembered chains to
    /// replay, which of 2–3 mentions plays which remembered role (at most one call each a
    /// request). Everything else is the deterministic planner's.
    Unsure,
}

impl Decides {
    /// Reads the setting's value.
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "open" | "" => Ok(Decides::Open),
            "all" => Ok(Decides::All),
            "unsure" => Ok(Decides::Unsure),
            other => Err(format!("`{other}` is not one of open, all, unsure")),
        }
    }

    /// The setting's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Decides::Open => "open",
            Decides::All => "all",
            Decides::Unsure => "unsure",
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

    /// Its settings.
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
            let _ = super::planner::RUN_USAGE.try_with(|u| {
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
            && super::planner::RUN_USAGE
                .try_with(|u| {
                    u.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(self.settings.label())
                        .is_some_and(|m| m.calls >= limit)
                })
                .unwrap_or(false)
    }

    /// Ask once and validate, else `None` (the rules decide): the reading's questions, at most
    /// one completion each, so a request never costs more than two.
    async fn ask_once<T>(
        &self,
        name: &str,
        prompt: &str,
        schema: Value,
        check: impl Fn(&Value) -> std::result::Result<T, String>,
    ) -> Result<Option<T>> {
        self.ask_up_to(1, name, prompt, schema, check).await
    }

    /// Ask, validate, ask once more with the problem, else `None` (the caller falls back).
    async fn ask_valid<T>(
        &self,
        name: &str,
        prompt: &str,
        schema: Value,
        check: impl Fn(&Value) -> std::result::Result<T, String>,
    ) -> Result<Option<T>> {
        self.ask_up_to(2, name, prompt, schema, check).await
    }

    /// Ask at most `attempts` times, each again with the previous answer's problem, until an
    /// answer passes `check`; else `None`.
    async fn ask_up_to<T>(
        &self,
        attempts: usize,
        name: &str,
        prompt: &str,
        schema: Value,
        check: impl Fn(&Value) -> std::result::Result<T, String>,
    ) -> Result<Option<T>> {
        let mut prompt = prompt.to_string();
        for _ in 0..attempts {
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
        if self.settings.decides != Decides::All {
            return Ok(subtasks_of(&ctx.request));
        }
        let prompt = render_decompose(ctx, &self.categories);
        let got = self.ask_valid("decompose", &prompt, decompose_schema(), parse_subtasks).await?;
        Ok(got.unwrap_or_else(|| subtasks_of(&ctx.request)))
    }

    async fn choose(&self, ctx: &Context, candidates: &[Candidate]) -> Result<Decision> {
        if candidates.is_empty() || self.settings.decides == Decides::Unsure {
            return self.fallback.choose(ctx, candidates).await;
        }
        // Deciding what is open: the deterministic choice stands unless other API candidates
        // score close to it; the model then chooses among those few only.
        let (offered, index_of): (Vec<Candidate>, Vec<usize>) = match self.settings.decides {
            Decides::All => (candidates.to_vec(), (0..candidates.len()).collect()),
            Decides::Open | Decides::Unsure => {
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
        if self.settings.decides == Decides::Unsure {
            return Ok(base);
        }
        // Deciding what is open: only the parameters the shared filler left open are asked,
        // the rest stays as it filled them.
        let (view, filled) = match self.settings.decides {
            Decides::All => (api.clone(), Map::new()),
            Decides::Open | Decides::Unsure => {
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
                    let source = super::planner::ArgSource::of_reference(v)
                        .unwrap_or_else(|| base.sources.get(k).cloned().unwrap_or(super::planner::ArgSource::Given));
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
        self.settings.decides != Decides::Unsure
    }

    async fn plan(&self, ctx: &Context, solutions: &[SolutionView]) -> Result<Option<Plan>> {
        if solutions.is_empty() {
            return Ok(None);
        }
        if self.settings.decides == Decides::Unsure {
            return self.fallback.plan(ctx, solutions).await;
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

    async fn choose_memory(&self, ctx: &Context, old: &[MemoryView]) -> Result<Option<Recollection>> {
        if old.len() < 2 {
            return Ok(None);
        }
        let old = &old[..old.len().min(3)];
        let n = old.len();
        self.ask_once("recall", &render_recall(ctx, old), recall_schema(n), |v| parse_recall(v, n)).await
    }

    async fn align_mentions(
        &self,
        ctx: &Context,
        old_request: &str,
        unsure: &UnsureMentions,
    ) -> Result<Option<Vec<usize>>> {
        if !(2..=3).contains(&unsure.old.len()) || unsure.new.len() < unsure.old.len() || unsure.new.len() > 3 {
            return Ok(None);
        }
        self.ask_once("align", &render_align(ctx, old_request, unsure), align_schema(unsure), |v| {
            parse_align(v, unsure)
        })
        .await
    }

    async fn choose_api(&self, ctx: &Context, word: &str, apis: &[ApiView]) -> Result<Option<usize>> {
        if !(2..=5).contains(&apis.len()) {
            return Ok(None);
        }
        let n = apis.len();
        Ok(self.ask_once("ask", &render_ask(ctx, word, apis), recall_schema(n), |v| parse_pick(v, n)).await?.flatten())
    }

    async fn judge(&self, ctx: &Context) -> Result<Judgement> {
        if ctx.path.is_empty() || self.settings.decides != Decides::All {
            return Ok(judge_path(ctx));
        }
        Ok(self
            .ask_valid("judge", &render_judge(ctx), judge_schema(), |v| parse_judgement(v, ctx))
            .await?
            .unwrap_or_else(|| judge_path(ctx)))
    }

    async fn answer(&self, ctx: &Context) -> Result<String> {
        if self.settings.decides != Decides::All {
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
        self.settings.decides != Decides::All
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
        ctx.path.push(crate::plan::Step {
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
