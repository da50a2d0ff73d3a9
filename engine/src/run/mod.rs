//! A run (thesis Algorithm 4.1): recall a long-term memory or decompose the request, retrieve seed
//! tools, search the tool graph depth-first — call an API, offer its top-K successors by blended
//! weight (filled up to K from the retriever), let the planner choose next / backtrack / finish /
//! give up — reflect on failure, remember what worked, update the dynamic weights, answer.
//! Every step goes to the trace, and to a stream when one is given.

pub mod health;
pub mod learn;
pub mod memory;
mod providers;
pub mod trace;

use crate::exec::{compress, keep_set, CallError, CallSpec, Executor};
use crate::graph::{weights, GraphStore};
use crate::plan::deterministic::{canonical, fill_arguments, judge_path};
use crate::plan::values::RequestValues;
use crate::plan::program::{Plan, SolutionLibrary, SolutionView};
use crate::plan::{ApiView, ArgSource, Candidate, Context, DeadEnd, Decision, Filled, Judgement, ModelUsage, Offer, Planner, Source, Step, Subtask};
use crate::retrieval::hybrid::{Method, Retriever};
use crate::retrieval::Filter;
use crate::Result;
use memory::{Memory, MemoryStep};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgraph_schema::{GraphSnapshot, WeightSettings, END_ID, START_ID, STATUS_ACTIVE};
use trace::{Offered, TraceEvent};

pub use toolgraph_schema::{Mode, RunSettings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Judged complete: every call usable and every part of the request covered.
    Answered,
    /// Some parts done: the answer says which are missing.
    Partial,
    GaveUp,
    NeedsInput,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Answered => "answered",
            Status::Partial => "partial",
            Status::GaveUp => "gave_up",
            Status::NeedsInput => "needs_input",
        }
    }
}

/// What a planned-only call "returns": its documented output fields (dotted paths) as nested
/// objects whose leaves hold their own reference (`$var2.hotel.id$`), so a later argument that
/// takes the field is written as that reference. An API with no documented output returns one
/// field, `result`.
pub fn skeleton(fields: &[String], label: &str) -> Value {
    fn put(m: &mut Map<String, Value>, parts: &[&str], full: &str, label: &str) {
        let Some((head, rest)) = parts.split_first() else { return };
        if rest.is_empty() {
            m.entry(head.to_string()).or_insert_with(|| Value::String(format!("${label}.{full}$")));
            return;
        }
        let e = m.entry(head.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !e.is_object() {
            *e = Value::Object(Map::new());
        }
        if let Value::Object(sub) = e {
            put(sub, rest, full, label);
        }
    }
    let mut root = Map::new();
    // Longest paths first, so a parent (`hotel`) becomes an object rather than a leaf.
    let mut sorted: Vec<&String> = fields.iter().filter(|f| !f.is_empty()).collect();
    sorted.sort_by_key(|f| std::cmp::Reverse(f.matches('.').count()));
    for f in sorted.into_iter().take(256) {
        let parts: Vec<&str> = f.split('.').collect();
        put(&mut root, &parts, f, label);
    }
    if root.is_empty() {
        root.insert("result".into(), Value::String(format!("${label}.result$")));
    }
    Value::Object(root)
}

/// How many of the APIs retrieval finds for a subtask may serve it.
const SUBTASK_APIS: usize = 5;

/// Providers offered per missing parameter to a planner that looks at them.
const OFFERS_PER_PARAM: usize = 3;

/// A field's or parameter's comparable form (last path segment, lower-case, no `_`/`-`).
pub fn normalize_field(name: &str) -> String {
    providers::normalize(name)
}

/// Whether a field's normalized leaf provides a parameter so normalized (Reverse Chain's match).
pub fn field_provides(leaf: &str, want: &str) -> bool {
    providers::provides(leaf, want)
}

/// Per-request choices over the engine's settings (daemon `POST /v1/orchestrate {planner, mode,
/// model}`, CLI flags).
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Who decides this run (the engine's planner when `None`).
    pub planner: Option<Arc<dyn Planner>>,
    pub mode: Option<Mode>,
    pub backward: Option<bool>,
    /// Asked before any call to an API that requires approval (human in the loop).
    pub approver: Option<Arc<dyn Approver>>,
    /// Plan only: nothing is sent. Each call's response is the skeleton of its documented output
    /// fields (every leaf holds its own `$varN.path$` reference), so the search, Reverse Chain and
    /// plan mode run as usual and the chain comes back with its data flow as references. Nothing
    /// is remembered or learned from such a run.
    pub dry_run: bool,
}

/// A call waiting for a person's approval: the API and its resolved arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub api: String,
    pub name: String,
    pub arguments: Map<String, Value>,
}

/// A person's decision on a [`PendingCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    Approved { by: String },
    Rejected { by: String, reason: String },
}

/// Decides whether calls to APIs that require approval may be sent. `decide` may wait as long as
/// it needs (the run pauses); a rejection fails that branch and the search goes on.
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    fn requires(&self, api: &str) -> bool;
    async fn decide(&self, call: &PendingCall) -> ApprovalDecision;
}

/// What the user must give for the run to go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeedsInput {
    pub api: String,
    pub missing: Vec<String>,
    pub message: String,
}

/// One call of the final chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainCall {
    pub label: String,
    pub api: String,
    pub name: String,
    /// As planned: references to earlier outputs kept (`$var1.field$`).
    pub arguments: Map<String, Value>,
    /// As sent.
    pub sent: Map<String, Value>,
    /// The subtask (index into the decomposition) this call served, when searched per subtask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtask: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub planner_calls: u64,
    pub http_calls: u64,
    pub failed_calls: u64,
    pub backtracks: u64,
    pub reflections: u64,
    pub recalled: bool,
    pub total_ms: f64,
    /// Time inside HTTP calls to the tools.
    pub http_ms: f64,
    /// Time embedding the request.
    pub embed_ms: f64,
    /// Time in seed retrieval (lexical + vector search; part of engine_ms).
    pub retrieve_ms: f64,
    /// LLM calls and tokens of this run, by configured model name.
    #[serde(default)]
    pub llm: std::collections::BTreeMap<String, ModelUsage>,
    /// Plan mode: whether a plan was made, and at which step it fell back to the search.
    #[serde(default)]
    pub planned: bool,
    #[serde(default)]
    pub plan_fallback_at: Option<usize>,
    /// Planned only ([`RunOptions::dry_run`]): no call was sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// total − http − embed: what the engine itself spent.
    pub engine_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub request: String,
    pub status: Status,
    pub answer: String,
    pub chain: Vec<ChainCall>,
    pub needs_input: Option<NeedsInput>,
    pub judgement: Option<Judgement>,
    pub trace: Vec<TraceEvent>,
    pub stats: RunStats,
    /// The full response of each chain call, in chain order (the trace holds them too); what a
    /// session carries into its next turn.
    #[serde(skip)]
    pub responses: Vec<Arc<Value>>,
}

/// The orchestration engine over one loaded graph.
pub struct Engine {
    graph: Arc<GraphSnapshot>,
    apis: HashMap<String, Arc<ApiView>>,
    providers: providers::Providers,
    store: Option<Arc<dyn GraphStore>>,
    retriever: Arc<Retriever>,
    memory: Option<Arc<Memory>>,
    executor: Executor,
    planner: Arc<dyn Planner>,
    settings: RunSettings,
    weights: WeightSettings,
    health: Option<Arc<health::Health>>,
    /// Learning from runs is serialized (ledger check, counts, weights).
    learning: tokio::sync::Mutex<()>,
    /// Plan mode's solution library, derived from the graph when first needed.
    solutions: std::sync::OnceLock<SolutionLibrary>,
}

/// What the graph took from one run: counts and edges, and status changes of failing APIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunLearning {
    pub learned: learn::Learned,
    pub status_changes: Vec<toolgraph_schema::StatusChange>,
}

/// Where a run stands while it searches.
struct RunState<'a> {
    ctx: Context,
    trace: Vec<TraceEvent>,
    sink: Option<&'a tokio::sync::mpsc::Sender<TraceEvent>>,
    stats: RunStats,
    sims: HashMap<String, f64>,
    /// (from, to) steps of recalled memories' chains (START for the first) → best recall score.
    hints: HashMap<(String, String), f64>,
    seeds: Vec<String>,
    started: Instant,
    calls_made: usize,
    next_label: usize,
    needs_input: Option<NeedsInput>,
    sent: HashMap<String, Map<String, Value>>,
    /// Who decides, and how candidates are found, in this run.
    planner: Arc<dyn Planner>,
    mode: Mode,
    backward: bool,
    /// APIs whose arguments Reverse Chain is completing now (no provider loops).
    inserting: Vec<String>,
    /// Seeds of each subtask (per-subtask search), and their similarities to it.
    subtask_seeds: Vec<Vec<String>>,
    subtask_sims: Vec<HashMap<String, f64>>,
    /// Judge and answer without the planner (memory replays, plans that passed).
    deterministic_judge: bool,
    approver: Option<Arc<dyn Approver>>,
    dry_run: bool,
}

impl RunState<'_> {
    /// Similarities to what is being searched now: the focused subtask, else the request.
    fn sims(&self) -> &HashMap<String, f64> {
        match self.ctx.focus {
            Some(i) if i < self.subtask_sims.len() => &self.subtask_sims[i],
            _ => &self.sims,
        }
    }

    async fn emit(&mut self, e: TraceEvent) {
        if let Some(s) = self.sink {
            let _ = s.send(e.clone()).await;
        }
        self.trace.push(e);
    }
}

enum Ended {
    Finished,
    GaveUp(String),
}

/// What an [`Engine`] is made of.
pub struct EngineParts {
    /// The tool graph, loaded once (search reads it in memory).
    pub graph: Arc<GraphSnapshot>,
    /// Where dynamic-weight updates go (`None`: never learn).
    pub store: Option<Arc<dyn GraphStore>>,
    pub retriever: Arc<Retriever>,
    pub memory: Option<Arc<Memory>>,
    pub executor: Executor,
    pub planner: Arc<dyn Planner>,
    pub settings: RunSettings,
    pub weights: WeightSettings,
    /// API health shared across engines (`None`: no API is ever degraded).
    pub health: Option<Arc<health::Health>>,
}

impl Engine {
    pub fn new(p: EngineParts) -> Self {
        let apis = p
            .graph
            .apis
            .values()
            .filter(|a| a.status == STATUS_ACTIVE)
            .map(|a| {
                let mut v = ApiView::from_node(a);
                // How often observed chains stop after it (when any went through it).
                let seen = !p.graph.successors(&a.id, 1).is_empty();
                v.ends = seen.then(|| p.graph.next.get(&(a.id.clone(), END_ID.to_string())).map(|e| e.static_weight).unwrap_or(0.0));
                (a.id.clone(), Arc::new(v))
            })
            .collect();
        let providers = providers::Providers::build(&apis, &p.graph.feeds);
        Engine {
            graph: p.graph,
            apis,
            providers,
            store: p.store,
            retriever: p.retriever,
            memory: p.memory,
            executor: p.executor,
            planner: p.planner,
            settings: p.settings,
            weights: p.weights,
            health: p.health,
            learning: tokio::sync::Mutex::new(()),
            solutions: std::sync::OnceLock::new(),
        }
    }

    /// The same engine over a newer graph (counts, weights and statuses learned since).
    pub fn rebuilt(&self, graph: Arc<GraphSnapshot>) -> Engine {
        Engine::new(EngineParts {
            graph,
            store: self.store.clone(),
            retriever: self.retriever.clone(),
            memory: self.memory.clone(),
            executor: self.executor.clone(),
            planner: self.planner.clone(),
            settings: self.settings.clone(),
            weights: self.weights,
            health: self.health.clone(),
        })
    }

    pub fn health(&self) -> Option<&Arc<health::Health>> {
        self.health.as_ref()
    }

    /// Learn from run `run_id` (its report): API health first (an API that keeps failing is
    /// marked `degraded` in the graph, logged), then — with `run.learn` — calls, successes and the
    /// answered chain into the graph's counts, once per run id ([`learn::learn_run`]).
    pub async fn learn_from(&self, run_id: &str, report: &RunReport) -> Result<RunLearning> {
        let mut out = RunLearning::default();
        let Some(store) = &self.store else { return Ok(out) };
        // A planned-only run sent nothing: there is nothing to learn from.
        if report.stats.dry_run {
            return Ok(out);
        }
        let _one = self.learning.lock().await;
        if let Some(h) = &self.health {
            for change in h.observe(&learn::sent_calls(report)) {
                if store.set_api_status(&change).await? {
                    tracing::warn!(api = %change.id, status = %change.status, reason = %change.reason, "API status changed");
                    out.status_changes.push(change);
                }
            }
        }
        if self.settings.learn {
            out.learned = learn::learn_run(store.as_ref(), run_id, report, self.weights).await?;
            // The judgement's evaluation moves the dynamic weights (once: with the run's counts).
            if out.learned.applied && !report.stats.recalled {
                if let Some(j) = &report.judgement {
                    let deltas: Vec<(String, f64)> = j.deltas.iter().filter(|(id, _)| self.apis.contains_key(id)).cloned().collect();
                    weights::apply_evaluation(store.as_ref(), &deltas, self.weights).await?;
                }
            }
            // Retrieval learns too: the request joins the usage vectors of the chain's APIs.
            if out.learned.applied && report.status == Status::Answered {
                let v = self.retriever.embedder().embed(vec![report.request.clone()]).await?.pop().unwrap_or_default();
                let apis: Vec<String> = report.chain.iter().map(|c| c.api.clone()).collect();
                self.retriever.add_usage(&apis, &v).await?;
            }
        }
        Ok(out)
    }

    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    pub fn with_settings(mut self, settings: RunSettings) -> Self {
        self.settings = settings;
        self
    }

    pub fn planner(&self) -> &Arc<dyn Planner> {
        &self.planner
    }

    /// The graph the engine searches (loaded when it was built).
    pub fn graph(&self) -> &Arc<GraphSnapshot> {
        &self.graph
    }

    pub fn retriever(&self) -> &Arc<Retriever> {
        &self.retriever
    }

    /// Run `request` to an answer, a give-up or a `needs_input`. `given` holds values the user
    /// supplied for parameters (the answer to an earlier `needs_input`).
    pub async fn run(&self, request: &str, given: Map<String, Value>, sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>) -> Result<RunReport> {
        self.run_turn(request, given, Vec::new(), sink).await
    }

    /// [`Engine::run`] as one turn of a conversation: `earlier` holds outputs of the session's
    /// earlier turns, which may fill arguments this request gives no value for.
    pub async fn run_turn(&self, request: &str, given: Map<String, Value>, earlier: Vec<crate::plan::Earlier>, sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>) -> Result<RunReport> {
        self.run_with(request, given, earlier, sink, RunOptions::default()).await
    }

    /// [`Engine::run_turn`] with per-request choices (planner, mode, target-first). LLM calls and
    /// tokens of this run are counted per model into its stats.
    pub async fn run_with(&self, request: &str, given: Map<String, Value>, earlier: Vec<crate::plan::Earlier>, sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>, opts: RunOptions) -> Result<RunReport> {
        let usage: crate::plan::RunUsage = Default::default();
        let mut r = crate::plan::RUN_USAGE.scope(usage.clone(), self.run_inner(request, given, earlier, sink, opts)).await?;
        r.stats.llm = usage.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(r)
    }

    /// A fresh run's state: the request's context with the given values and earlier turns.
    fn new_state<'a>(&self, request: &str, given: Map<String, Value>, earlier: Vec<crate::plan::Earlier>, sink: Option<&'a tokio::sync::mpsc::Sender<TraceEvent>>, opts: &RunOptions) -> RunState<'a> {
        let started = Instant::now();
        let today = chrono::Utc::now().date_naive();
        let mut ctx = Context::new(request, RequestValues::extract(request, today));
        ctx.given = given;
        let mut turns: Vec<(usize, &str)> = earlier.iter().map(|e| (e.turn, e.request.as_str())).collect();
        turns.dedup();
        for (turn, req) in turns {
            ctx.notes.push(format!("earlier turn {turn} of this conversation asked: {req}"));
        }
        ctx.earlier = earlier;
        RunState {
            ctx,
            trace: Vec::new(),
            sink,
            stats: RunStats::default(),
            sims: HashMap::new(),
            hints: HashMap::new(),
            seeds: Vec::new(),
            started,
            calls_made: 0,
            next_label: 1,
            needs_input: None,
            sent: HashMap::new(),
            planner: opts.planner.clone().unwrap_or_else(|| self.planner.clone()),
            mode: opts.mode.unwrap_or(self.settings.mode),
            backward: opts.backward.unwrap_or(self.settings.backward),
            inserting: Vec::new(),
            subtask_seeds: Vec::new(),
            subtask_sims: Vec::new(),
            deterministic_judge: false,
            approver: opts.approver.clone(),
            dry_run: opts.dry_run,
        }
    }

    /// Check a chain a person wrote without running it: APIs known and usable, argument names,
    /// required arguments, literal values' types against the schema, `$varN.field$` references to
    /// earlier steps only. `Err`: every problem found first, with its step.
    pub fn check_chain(&self, request: &str, chain: &Value) -> std::result::Result<(), String> {
        let st = self.new_state(request, Map::new(), Vec::new(), None, &RunOptions::default());
        let steps = chain.get("steps").and_then(Value::as_array).ok_or("`steps` must be a list")?;
        let mut named = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let id = s.get("api").and_then(Value::as_str).ok_or_else(|| format!("step {}: `api` is missing", i + 1))?;
            match self.apis.get(id) {
                Some(a) => named.push(a.clone()),
                None => return Err(format!("step {}: no usable API `{id}` (ids look like category/tool/api; invalid APIs cannot be called)", i + 1)),
            }
        }
        let plan = crate::plan::program::parse_plan(chain, &st.ctx, &named, "user")?;
        for (i, step) in plan.steps.iter().enumerate() {
            let Some(api) = self.apis.get(&step.api) else { continue };
            for (k, v) in step.arguments.iter().flatten() {
                let literal = !v.to_string().contains('$');
                if let (true, Some(p)) = (literal, api.params.iter().find(|p| &p.name == k)) {
                    let mut one = p.clone();
                    one.required = false;
                    let args: Map<String, Value> = [(k.clone(), v.clone())].into_iter().collect();
                    if let Err(problems) = crate::exec::validate(&[one], &args) {
                        let text: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.argument, p.problem)).collect();
                        return Err(format!("step {} ({}): {}", i + 1, api.name, text.join("; ")));
                    }
                }
            }
        }
        Ok(())
    }

    /// Execute a chain a person wrote (developer mode): `{"steps": [{"api", "arguments"?, "for_each"?,
    /// "if"?}]}` with `$varN.field$` references to earlier steps' outputs, checked like a planned
    /// chain before anything is sent (`Err`: what is wrong, nothing ran). Steps without arguments
    /// are filled like planned calls (Reverse Chain included). The run is judged deterministically
    /// and never remembered as a plan (a person's chain is not the engine's judgement).
    pub async fn execute_chain(&self, request: &str, chain: &Value, given: Map<String, Value>, sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>, opts: RunOptions) -> Result<std::result::Result<RunReport, String>> {
        let mut st = self.new_state(request, given, Vec::new(), sink, &opts);
        let named: Vec<Arc<ApiView>> = chain
            .get("steps")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("api").and_then(Value::as_str))
            .filter_map(|id| self.apis.get(id).cloned())
            .collect();
        let plan = match crate::plan::program::parse_plan(chain, &st.ctx, &named, "user") {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        st.deterministic_judge = true;
        st.emit(TraceEvent::Plan { source: "user".into(), solution: Vec::new(), steps: plan.steps.iter().map(|s| s.api.clone()).collect() }).await;
        let usage: crate::plan::RunUsage = Default::default();
        let ended = crate::plan::RUN_USAGE.scope(usage.clone(), self.execute_plan(&mut st, &plan)).await?;
        let ended = match ended {
            Ok(()) => Ended::Finished,
            Err((n, reason)) => {
                st.emit(TraceEvent::PlanFailed { step: n, reason: reason.clone() }).await;
                Ended::GaveUp(reason)
            }
        };
        let failed = matches!(ended, Ended::GaveUp(_));
        let mut settings_off = self.settings.clone();
        settings_off.remember = false;
        let mut r = self.conclude_with(st, ended, &[], false, &settings_off).await?;
        if failed && r.status == Status::Answered {
            r.status = Status::Partial;
        }
        r.stats.llm = usage.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(Ok(r))
    }

    async fn run_inner(&self, request: &str, given: Map<String, Value>, earlier: Vec<crate::plan::Earlier>, sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>, opts: RunOptions) -> Result<RunReport> {
        let mut st = self.new_state(request, given, earlier, sink, &opts);
        st.stats.dry_run = st.dry_run;
        let t = Instant::now();
        let vector = self.retriever.embedder().embed(vec![request.to_string()]).await?.pop().unwrap_or_default();
        st.stats.embed_ms += t.elapsed().as_secs_f64() * 1000.0;

        // Long-term memory: a close enough hit is replayed with zero planning calls.
        if self.settings.use_memory {
            if let Some(mem) = &self.memory {
                let hits = mem.recall(&vector, self.settings.memory_hints.max(1)).await?;
                // Memories below the replay threshold still vote for the steps their chains made.
                for h in hits.iter().filter(|h| h.score >= self.settings.hint_threshold) {
                    let mut prev = START_ID.to_string();
                    for step in &h.entry.chain {
                        let e = st.hints.entry((prev.clone(), step.api.clone())).or_insert(0.0);
                        *e = e.max(h.score as f64);
                        prev = step.api.clone();
                    }
                    let e = st.hints.entry((prev, END_ID.to_string())).or_insert(0.0);
                    *e = e.max(h.score as f64);
                }
                if let Some(hit) = hits.into_iter().next() {
                    let replay = hit.score >= self.settings.memory_threshold;
                    st.emit(TraceEvent::Recall { request: hit.entry.request.clone(), score: hit.score, chain: hit.entry.chain.iter().map(|s| s.api.clone()).collect(), replayed: replay }).await;
                    if replay {
                        match self.replay(&mut st, &hit.entry.chain).await {
                            Ok(()) => {
                                st.stats.recalled = true;
                                return self.conclude(st, Ended::Finished, &vector, true).await;
                            }
                            Err(reason) => {
                                st.emit(TraceEvent::RecallFailed { reason }).await;
                                st.ctx.path.clear();
                                st.ctx.fields.clear();
                                st.sent.clear();
                                st.next_label = 1;
                            }
                        }
                    }
                }
            }
        }

        // Decompose and retrieve seeds per subtask; similarity = best max-normalized score.
        let plan_mode = st.mode == Mode::Plan;
        let subtasks: Vec<Subtask> = if plan_mode {
            // Plan mode spends no decision on decomposition: the plan is the decomposition.
            crate::plan::deterministic::subtasks_of(request)
        } else {
            st.stats.planner_calls += 1;
            st.planner.decompose(&st.ctx).await?
        };
        st.ctx.subtasks = subtasks.clone();
        let split = subtasks.len() > 1;
        let per_subtask = self.settings.per_subtask && split && !plan_mode && st.mode != Mode::RetrieveGreedy;
        let mut texts = vec![request.to_string()];
        if split {
            texts.extend(subtasks.iter().map(|s| s.request.clone()));
        }
        let t = Instant::now();
        let mut vectors = vec![vector.clone()];
        if texts.len() > 1 {
            vectors.extend(self.retriever.embedder().embed(texts[1..].to_vec()).await?);
        }
        st.stats.embed_ms += t.elapsed().as_secs_f64() * 1000.0;
        let pool = self.settings.seeds.max(50);
        for (i, (text, v)) in texts.iter().zip(&vectors).enumerate() {
            let t = Instant::now();
            // A subtask's own APIs are what its words ask for (usage vectors left out: they pull
            // in the APIs of whole chains, which would let one call cover several subtasks).
            let usage = if i > 0 && !self.settings.retrieve_subtasks { 0.0 } else { self.retriever.usage_weight() };
            let mut hits = self.retriever.search_with_usage(text, v, pool, &Filter::default(), Method::Hybrid, None, usage).await?;
            // A subtask that names its category prefers that category's APIs.
            if let Some(cat) = (i > 0).then(|| subtasks[i - 1].category.as_deref()).flatten().map(str::to_lowercase) {
                let mut boosted = false;
                for h in hits.iter_mut() {
                    if self.apis.get(&h.id).is_some_and(|a| a.category.to_lowercase() == cat) {
                        h.score *= 1.25;
                        boosted = true;
                    }
                }
                if boosted {
                    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
                }
            }
            st.stats.retrieve_ms += t.elapsed().as_secs_f64() * 1000.0;
            let top = hits.first().map(|h| h.score as f64).unwrap_or(1.0).max(1e-9);
            if i > 0 {
                // What serves this subtask, for the judge's coverage check.
                let ids: Vec<String> = hits.iter().filter(|h| self.apis.contains_key(&h.id)).take(SUBTASK_APIS).map(|h| h.id.clone()).collect();
                st.ctx.subtask_apis.push((text.clone(), ids));
                if per_subtask {
                    let sims: HashMap<String, f64> = hits.iter().map(|h| (h.id.clone(), h.score as f64 / top)).collect();
                    let seeds: Vec<(String, f64)> = hits.iter().filter(|h| self.apis.contains_key(&h.id)).take(self.settings.seeds).map(|h| (h.id.clone(), h.score as f64 / top)).collect();
                    st.subtask_seeds.push(seeds.iter().map(|(id, _)| id.clone()).collect());
                    st.subtask_sims.push(sims);
                    st.emit(TraceEvent::Retrieve { subtask: text.clone(), seeds }).await;
                }
                if !self.settings.retrieve_subtasks {
                    continue;
                }
            }
            let mut seeds = Vec::new();
            for h in &hits {
                let s = h.score as f64 / top;
                let e = st.sims.entry(h.id.clone()).or_insert(0.0);
                *e = e.max(s);
                if seeds.len() < self.settings.seeds && self.apis.contains_key(&h.id) {
                    seeds.push((h.id.clone(), s));
                    if !st.seeds.contains(&h.id) {
                        st.seeds.push(h.id.clone());
                    }
                }
            }
            st.emit(TraceEvent::Retrieve { subtask: text.clone(), seeds }).await;
        }

        // Plan mode: one decision writes the whole plan; it runs; a failing step (or a path that
        // does not cover the request) hands over to the graph search from where it stopped.
        if plan_mode {
            let views = self.solution_views(&st);
            st.stats.planner_calls += 1;
            let plan = st.planner.plan(&st.ctx, &views).await?;
            let fallback = match plan {
                None => (0, format!("no solution of the library fits the request ({} offered)", views.len())),
                Some(p) => {
                    st.stats.planned = true;
                    let solution = p.solution.and_then(|i| self.solutions.get().and_then(|l| l.solutions.get(i))).map(|s| s.apis.clone()).unwrap_or_default();
                    st.emit(TraceEvent::Plan { source: p.source.clone(), solution, steps: p.steps.iter().map(|s| s.api.clone()).collect() }).await;
                    match self.execute_plan(&mut st, &p).await? {
                        Ok(()) => {
                            let j = judge_path(&st.ctx);
                            if j.pass {
                                st.deterministic_judge = true;
                                return self.conclude(st, Ended::Finished, &vector, false).await;
                            }
                            (p.steps.len() + 1, format!("the plan ran but {}", j.reason))
                        }
                        Err(failed) => failed,
                    }
                }
            };
            st.stats.plan_fallback_at = Some(fallback.0);
            st.emit(TraceEvent::PlanFailed { step: fallback.0, reason: fallback.1 }).await;
            st.mode = Mode::Graph;
        }

        // The best judged path so far: grade, context, arguments as sent.
        // Paths rank by (fewer steps with unusable responses, then grade): an answer is built from
        // usable responses only.
        type Best = ((usize, f64), Context, HashMap<String, Map<String, Value>>);
        let rank = |ctx: &Context, grade: f64| (ctx.path.iter().filter(|s| crate::plan::deterministic::bad_response(&s.response).is_some()).count(), grade);
        let better = |a: (usize, f64), b: (usize, f64)| a.0 < b.0 || (a.0 == b.0 && a.1 > b.1);
        let mut best: Option<Best> = None;
        let mut round = 0;
        let mut first = true;
        let ended = loop {
            let ended = if first && per_subtask { self.search_subtasks(&mut st).await? } else { self.search(&mut st).await? };
            first = false;
            if st.ctx.path.is_empty() || round >= self.settings.reflection_rounds || self.out_of_budget(&st).is_some() {
                break ended;
            }
            st.stats.planner_calls += 1;
            let j = st.planner.judge(&st.ctx).await?;
            if j.pass {
                break ended;
            }
            let r = rank(&st.ctx, j.grade);
            if best.as_ref().is_none_or(|b| better(r, b.0)) {
                best = Some((r, st.ctx.clone(), st.sent.clone()));
            }
            round += 1;
            st.stats.reflections += 1;
            match j.first_bad_step {
                None if !j.complete() => {
                    // Every call was usable but the request is not covered: go on from the end
                    // of the path, with what is missing in context.
                    let missing = crate::plan::coverage::missing_text(&j.coverage);
                    st.ctx.notes.push(format!("round {round}: not covered yet: {missing}"));
                    st.emit(TraceEvent::Reflect { round, mode: "extend".into(), reason: j.reason.clone(), resume_at: Some(st.ctx.path.len()), excluded_tools: vec![] }).await;
                }
                Some(i) if i > 0 => {
                    // Resume from the first bad step: keep what came before, mark the bad call dead.
                    let bad = st.ctx.path[i].clone();
                    st.ctx.dead_ends.push(DeadEnd { api: bad.api.id.clone(), arguments: bad.arguments.clone(), reason: j.reason.clone() });
                    self.truncate(&mut st, i);
                    st.ctx.notes.push(format!("round {round}: {}", j.reason));
                    st.emit(TraceEvent::Reflect { round, mode: "resume".into(), reason: j.reason.clone(), resume_at: Some(i), excluded_tools: vec![] }).await;
                }
                _ => {
                    // Restart without the tools judged irrelevant; a tool that holds every seed
                    // (one-tool domains) loses only the APIs of the bad steps instead.
                    let mut excluded = Vec::new();
                    let bad_apis: Vec<String> = match j.first_bad_step {
                        Some(i) => st.ctx.path[i..].iter().map(|s| s.api.id.clone()).collect(),
                        None => st.ctx.path.iter().map(|s| s.api.id.clone()).collect(),
                    };
                    for t in &j.irrelevant_tools {
                        let holds_all = !st.seeds.is_empty() && st.seeds.iter().all(|id| self.apis.get(id).is_some_and(|a| &a.tool == t));
                        if holds_all {
                            for id in bad_apis.iter().filter(|id| self.apis.get(*id).is_some_and(|a| &a.tool == t)) {
                                if !st.ctx.excluded_apis.contains(id) {
                                    st.ctx.excluded_apis.push(id.clone());
                                    excluded.push(id.clone());
                                }
                            }
                        } else if !st.ctx.excluded_tools.contains(t) {
                            st.ctx.excluded_tools.push(t.clone());
                            excluded.push(t.clone());
                        }
                    }
                    if excluded.is_empty() {
                        if let Some(first) = bad_apis.first() {
                            st.ctx.excluded_apis.push(first.clone());
                            excluded.push(first.clone());
                        }
                    }
                    st.ctx.notes.push(format!("round {round}: {}", j.reason));
                    st.emit(TraceEvent::Reflect { round, mode: "restart".into(), reason: j.reason.clone(), resume_at: None, excluded_tools: excluded }).await;
                    self.truncate(&mut st, 0);
                }
            }
        };
        // A failed reflection keeps the best path seen.
        if let Some((seen, ctx, sent)) = best {
            let now = rank(&st.ctx, judge_path(&st.ctx).grade);
            if st.ctx.path.is_empty() || better(seen, now) {
                let trace = std::mem::take(&mut st.ctx.dead_ends);
                st.ctx = ctx;
                st.ctx.dead_ends.extend(trace);
                st.sent = sent;
            }
        }
        self.conclude(st, ended, &vector, false).await
    }

    fn truncate(&self, st: &mut RunState<'_>, len: usize) {
        while st.ctx.path.len() > len {
            if let Some(s) = st.ctx.path.pop() {
                st.sent.remove(&s.label);
                st.ctx.fields.remove(&s.label);
            }
        }
        st.next_label = st.ctx.path.len() + 1;
    }

    fn out_of_budget(&self, st: &RunState<'_>) -> Option<String> {
        if st.calls_made >= self.settings.max_calls {
            return Some(format!("call budget of {} spent", self.settings.max_calls));
        }
        if st.stats.planner_calls as usize >= self.settings.max_planner_calls {
            return Some(format!("planner budget of {} decisions spent", self.settings.max_planner_calls));
        }
        if st.started.elapsed() > Duration::from_millis(self.settings.wall_ms) {
            return Some(format!("time budget of {} ms spent", self.settings.wall_ms));
        }
        None
    }

    fn candidate(&self, st: &RunState<'_>, id: &str, source: Source, weight: f64) -> Option<Candidate> {
        if id == END_ID {
            let from = st.ctx.path.last().map(|s| s.api.id.clone()).unwrap_or_else(|| START_ID.to_string());
            let hint = st.hints.get(&(from, END_ID.to_string())).copied().unwrap_or(0.0);
            return Some(Candidate { id: END_ID.into(), source, weight, similarity: 0.0, hint, api: None });
        }
        let api = self.apis.get(id)?;
        if st.ctx.excluded_tools.contains(&api.tool) || st.ctx.excluded_apis.contains(&api.id) {
            return None;
        }
        if self.health.as_ref().is_some_and(|h| h.is_degraded(id)) {
            return None;
        }
        let from = st.ctx.path.last().map(|s| s.api.id.clone()).unwrap_or_else(|| START_ID.to_string());
        let hint = st.hints.get(&(from, id.to_string())).copied().unwrap_or(0.0);
        Some(Candidate { id: id.to_string(), source, weight, similarity: st.sims().get(id).copied().unwrap_or(0.0), hint, api: Some(api.clone()) })
    }

    /// The call `api` would be now (its id and the deterministic fill's arguments), or `None` when
    /// that repeats a call on the path or a dead end.
    fn variant(&self, st: &RunState<'_>, api: &ApiView) -> Option<String> {
        // Only an API already on the path or at a dead end can repeat a call.
        if !st.ctx.path.iter().any(|s| s.api.id == api.id) && !st.ctx.dead_ends.iter().any(|d| d.api == api.id) {
            return Some(format!("{}|", api.id));
        }
        let f = fill_arguments(&st.ctx, api);
        let key = canonical(&f.arguments);
        let repeats = st.ctx.path.iter().any(|s| s.api.id == api.id && canonical(&s.arguments) == key) || st.ctx.dead_ends.iter().any(|d| d.api == api.id && canonical(&d.arguments) == key);
        (!repeats).then(|| format!("{}|{key}", api.id))
    }

    /// The candidates at the current node (the root when the path is empty), each with the key of
    /// the call it would be (an API failed with some arguments may be offered with others).
    fn candidates(&self, st: &RunState<'_>) -> Vec<(Candidate, String)> {
        let k = self.settings.top_k.max(1);
        let mut out: Vec<Candidate> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let at = st.ctx.path.last().map(|s| s.api.id.clone());
        let graph = matches!(st.mode, Mode::Graph | Mode::Plan);
        let push = |out: &mut Vec<Candidate>, seen: &mut HashSet<String>, c: Candidate| {
            if seen.insert(c.id.clone()) {
                out.push(c);
            }
        };
        // A subtask's search starts at its own seeds (after the path earlier subtasks made).
        let at_root = st.ctx.path.len() == st.ctx.root;
        match (&at, graph) {
            (_, _) if at_root => {
                // Root: the seeds, with the START edge as graph evidence (a subtask starts like a
                // request of its own; earlier subtasks' outputs still fill its arguments).
                for id in &st.seeds {
                    let w = if graph { self.graph.next.get(&(START_ID.to_string(), id.clone())).map(|e| e.dynamic_weight).unwrap_or(0.0) } else { 0.0 };
                    let source = if w > 0.0 { Source::Graph } else { Source::Retriever };
                    if let Some(c) = self.candidate(st, id, source, w) {
                        if c.similarity >= self.settings.min_similarity || w > 0.0 {
                            push(&mut out, &mut seen, c);
                        }
                    }
                }
            }
            (Some(a), true) => {
                for s in self.graph.successors(a, k + 1) {
                    if let Some(c) = self.candidate(st, &s.id, Source::Graph, s.dynamic_weight) {
                        push(&mut out, &mut seen, c);
                    }
                }
            }
            (Some(_), false) => {}
            (None, _) => {}
        }
        // Steps recalled memories made from here join (as graph evidence: they are observed chains).
        let from = at.clone().unwrap_or_else(|| START_ID.to_string());
        let mut hinted: Vec<(&String, f64)> = st.hints.iter().filter(|((f, _), _)| *f == from).map(|((_, t), s)| (t, *s)).collect();
        hinted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        for (to, _) in hinted {
            if to == END_ID && at.is_none() {
                continue;
            }
            let w = self.graph.next.get(&(from.clone(), to.clone())).map(|e| e.dynamic_weight).unwrap_or(0.0);
            if let Some(c) = self.candidate(st, to, Source::Graph, w) {
                push(&mut out, &mut seen, c);
            }
        }
        if at.is_some() {
            // Fill up to K APIs from the retriever, by similarity.
            let mut ranked: Vec<(&String, &f64)> = st.sims().iter().filter(|(_, s)| **s >= self.settings.min_similarity).collect();
            ranked.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
            for (id, _) in ranked {
                if out.iter().filter(|c| !c.is_end()).count() >= k {
                    break;
                }
                if let Some(c) = self.candidate(st, id, Source::Retriever, 0.0) {
                    push(&mut out, &mut seen, c);
                }
            }
        }
        out.into_iter()
            .filter_map(|c| match &c.api {
                None => Some((c, END_ID.to_string())),
                Some(a) => self.variant(st, a).map(|k| (c, k)),
            })
            .collect()
    }

    /// Search each subtask in turn: its own seeds and its own depth-first search, continuing the
    /// shared path (a later subtask may use an earlier one's outputs). A subtask that finds
    /// nothing is noted and the next one goes on.
    async fn search_subtasks(&self, st: &mut RunState<'_>) -> Result<Ended> {
        let all_seeds = st.seeds.clone();
        let n = st.ctx.subtasks.len().min(st.subtask_seeds.len());
        let mut gave_up = Vec::new();
        for i in 0..n {
            if self.out_of_budget(st).is_some() {
                break;
            }
            st.ctx.focus = Some(i);
            st.ctx.root = st.ctx.path.len();
            st.seeds = st.subtask_seeds[i].clone();
            let sub = st.ctx.subtasks[i].clone();
            st.emit(TraceEvent::Subtask { index: i, name: sub.name.clone(), request: sub.request.clone(), category: sub.category.clone() }).await;
            if let Ended::GaveUp(reason) = self.search(st).await? {
                st.ctx.notes.push(format!("subtask {} ({}) found nothing: {reason}", i + 1, sub.name));
                gave_up.push(reason);
            }
        }
        st.ctx.focus = None;
        st.ctx.root = 0;
        st.seeds = all_seeds;
        Ok(if st.ctx.path.is_empty() { Ended::GaveUp(gave_up.first().cloned().unwrap_or_else(|| "no subtask found a usable call".into())) } else { Ended::Finished })
    }

    /// Target-first (Reverse Chain): of the candidates at the root, the API most likely to produce
    /// the answer — similar to the (sub)task and where observed chains end.
    fn target<'c>(&self, offered: &'c [Candidate]) -> Option<(usize, &'c Candidate)> {
        offered
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_end())
            .map(|(i, c)| {
                let ends = c.api.as_ref().and_then(|a| a.ends).unwrap_or(0.0);
                (i, c, c.similarity + ends + if ends >= 0.05 { 0.25 } else { 0.0 })
            })
            .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)))
            .map(|(i, c, _)| (i, c))
    }

    /// Depth-first search from the current path (empty, or the prefix a reflection resumes from;
    /// never below `ctx.root`, where the current subtask started).
    async fn search(&self, st: &mut RunState<'_>) -> Result<Ended> {
        // Candidates tried at each depth of the current path.
        let mut tried: Vec<HashSet<String>> = vec![HashSet::new(); st.ctx.path.len() + 1];
        let greedy = st.mode == Mode::RetrieveGreedy;
        let root = st.ctx.root;
        let mut backward = st.backward && st.ctx.path.len() == root;
        loop {
            if let Some(why) = self.out_of_budget(st) {
                return Ok(if st.ctx.path.len() <= root { Ended::GaveUp(why) } else { Ended::Finished });
            }
            let depth = st.ctx.path.len();
            tried.resize(depth + 1, HashSet::new());
            let (offered, keys): (Vec<Candidate>, Vec<String>) = if depth >= self.settings.max_depth {
                (Vec::new(), Vec::new())
            } else {
                self.candidates(st).into_iter().filter(|(_, k)| !tried[depth].contains(k)).unzip()
            };
            if offered.is_empty() && depth >= self.settings.max_depth {
                return Ok(Ended::Finished);
            }
            // Target-first: the first call is the API that answers; its inputs are completed
            // backwards by provider calls inserted before it.
            if backward {
                backward = false;
                if let Some((index, c)) = self.target(&offered) {
                    let api = c.api.clone().expect("not END");
                    let decision = Decision::Call { index, reason: format!("target first: {} produces what the request asks for; its inputs are completed backwards", api.name) };
                    st.emit(TraceEvent::Choose {
                        depth,
                        offered: offered.iter().map(|c| Offered { id: c.id.clone(), source: c.source, weight: c.weight, similarity: c.similarity }).collect(),
                        decision,
                    })
                    .await;
                    tried[depth].insert(keys[index].clone());
                    if self.call_api(st, &api, 0, false).await? {
                        tried.push(HashSet::new());
                    }
                    continue;
                }
            }
            st.stats.planner_calls += 1;
            let decision = st.planner.choose(&st.ctx, &offered).await?;
            st.emit(TraceEvent::Choose {
                depth,
                offered: offered.iter().map(|c| Offered { id: c.id.clone(), source: c.source, weight: c.weight, similarity: c.similarity }).collect(),
                decision: decision.clone(),
            })
            .await;
            let index = match decision {
                Decision::Finish { .. } if depth > root => return Ok(Ended::Finished),
                Decision::Finish { reason } | Decision::GiveUp { reason } if depth <= root => return Ok(Ended::GaveUp(reason)),
                Decision::GiveUp { reason } => return Ok(Ended::GaveUp(reason)),
                Decision::Backtrack { reason } => {
                    if depth <= root || greedy {
                        return Ok(if depth <= root { Ended::GaveUp(reason) } else { Ended::Finished });
                    }
                    self.backtrack(st, &mut tried, reason).await;
                    continue;
                }
                Decision::Call { index, .. } => index,
                Decision::Finish { .. } => unreachable!("handled above"),
            };
            let Some(chosen) = offered.get(index).cloned() else {
                continue;
            };
            tried[depth].insert(keys[index].clone());
            let Some(api) = chosen.api.clone() else {
                return Ok(Ended::Finished);
            };
            match self.call_api(st, &api, 0, false).await? {
                true => {
                    tried.push(HashSet::new());
                }
                false if greedy => return Ok(if st.ctx.path.len() <= root { Ended::GaveUp("the first call failed".into()) } else { Ended::Finished }),
                false => {}
            }
        }
    }

    async fn backtrack(&self, st: &mut RunState<'_>, tried: &mut Vec<HashSet<String>>, reason: String) {
        if let Some(s) = st.ctx.path.pop() {
            st.sent.remove(&s.label);
            st.ctx.fields.remove(&s.label);
            st.next_label = st.ctx.path.len() + 1;
            st.stats.backtracks += 1;
            st.ctx.dead_ends.push(DeadEnd { api: s.api.id.clone(), arguments: s.arguments.clone(), reason: reason.clone() });
            tried.truncate(st.ctx.path.len() + 1);
            st.emit(TraceEvent::Backtrack { api: s.api.id.clone(), reason }).await;
        }
    }

    /// The providers of parameter `param` of `api` (Reverse Chain), best first: a FEEDS edge naming
    /// the field, else an API whose documented output has that field; by graph weight, similarity.
    /// APIs excluded, degraded or already being completed are left out.
    fn providers_of(&self, st: &RunState<'_>, api: &ApiView, param: &str) -> Vec<Arc<ApiView>> {
        let mut scored: Vec<(f64, Arc<ApiView>)> = Vec::new();
        for (cand, feeds) in self.providers.candidates(&api.id, param) {
            if st.ctx.excluded_tools.contains(&cand.tool) || st.inserting.contains(&cand.id) || self.health.as_ref().is_some_and(|h| h.is_degraded(&cand.id)) {
                continue;
            }
            let w = self.graph.next.get(&(cand.id.clone(), api.id.clone())).map(|e| e.dynamic_weight).unwrap_or(0.0);
            let score = (if feeds { 1.0 } else { 0.0 }) + w + st.sims().get(&cand.id).copied().unwrap_or(0.0).max(st.sims.get(&cand.id).copied().unwrap_or(0.0)) * 0.5;
            scored.push((score, cand));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
        scored.into_iter().map(|(_, a)| a).collect()
    }

    fn provider_for(&self, st: &RunState<'_>, api: &ApiView, param: &str) -> Option<Arc<ApiView>> {
        self.providers_of(st, api, param).into_iter().next()
    }

    /// Provider offers for the required parameters of `api` no earlier output or request value fills.
    fn offers(&self, st: &RunState<'_>, api: &ApiView) -> Vec<Offer> {
        let open = fill_arguments(&st.ctx, api).missing;
        api.params
            .iter()
            .filter(|p| p.required && open.contains(&p.name))
            .map(|p| Offer { param: p.name.clone(), providers: self.providers_of(st, api, &p.name).into_iter().take(OFFERS_PER_PARAM).collect() })
            .filter(|o| !o.providers.is_empty())
            .collect()
    }

    /// Fill and execute one call; on success the step is on the path. Missing arguments are
    /// completed Reverse-Chain style: each gets its provider (the planner's pick, else the best
    /// one) called first, nesting at most `run.reverse_depth` deep; what nothing provides — or what
    /// the planner says only the user knows — ends in `needs_input` naming exactly those
    /// parameters. `deterministic`: fill without the planner (plan steps). Returns whether the
    /// call succeeded.
    fn call_api<'s, 'b>(&'s self, st: &'s mut RunState<'b>, api: &'s Arc<ApiView>, nesting: usize, deterministic: bool) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool>> + Send + 's>>
    where
        'b: 's,
    {
        Box::pin(async move {
            let fill = |st: &mut RunState<'b>| {
                let offers = if !deterministic && st.planner.wants_offers() { self.offers(st, api) } else { Vec::new() };
                if !deterministic {
                    st.stats.planner_calls += 1;
                }
                offers
            };
            let offers = fill(st);
            let mut filled: Filled = if deterministic { fill_arguments(&st.ctx, api) } else { st.planner.fill(&st.ctx, api, &offers).await? };
            if !filled.missing.is_empty() {
                let mut inserted = false;
                st.inserting.push(api.id.clone());
                for param in filled.missing.clone() {
                    if filled.ask_user.contains(&param) {
                        continue;
                    }
                    if nesting >= self.settings.reverse_depth || st.ctx.path.len() + 1 >= self.settings.max_depth {
                        break;
                    }
                    // An output inserted for an earlier parameter may provide this one too.
                    if inserted && !fill_arguments(&st.ctx, api).missing.contains(&param) {
                        continue;
                    }
                    let pick = filled.from_api.iter().find(|p| p.param == param).and_then(|p| self.apis.get(&p.api).cloned()).filter(|a| !st.inserting.contains(&a.id));
                    let Some(provider) = pick.or_else(|| self.provider_for(st, api, &param)) else { continue };
                    st.emit(TraceEvent::Insert { api: api.id.clone(), argument: param.clone(), provider: provider.id.clone() }).await;
                    if self.call_api(st, &provider, nesting + 1, deterministic).await? {
                        inserted = true;
                    }
                }
                st.inserting.pop();
                if inserted {
                    let offers = fill(st);
                    let again = if deterministic { fill_arguments(&st.ctx, api) } else { st.planner.fill(&st.ctx, api, &offers).await? };
                    filled = again;
                }
                if !filled.missing.is_empty() {
                    let message = format!("{} needs {} and no earlier output or API can provide {}; please give {}", api.name, filled.missing.join(", "), if filled.missing.len() == 1 { "it" } else { "them" }, if filled.missing.len() == 1 { "it" } else { "them" });
                    st.emit(TraceEvent::NeedsInput { api: api.id.clone(), missing: filled.missing.clone() }).await;
                    if st.needs_input.is_none() {
                        st.needs_input = Some(NeedsInput { api: api.id.clone(), missing: filled.missing.clone(), message });
                    }
                    st.ctx.dead_ends.push(DeadEnd { api: api.id.clone(), arguments: filled.arguments.clone(), reason: format!("missing {}", filled.missing.join(", ")) });
                    return Ok(false);
                }
            }
            Ok(self.execute(st, api, filled).await)
        })
    }

    /// The valid solutions closest to the request (plan mode), without excluded or degraded APIs.
    fn solution_views(&self, st: &RunState<'_>) -> Vec<SolutionView> {
        let lib = self.solutions.get_or_init(|| SolutionLibrary::build(&self.graph, &self.apis, self.settings.plan_max_steps, 20));
        let want = self.settings.plan_solutions.max(1);
        let mut out = Vec::new();
        for (index, score) in lib.rank(&st.sims, self.settings.min_similarity, want * 20) {
            let apis: Option<Vec<Arc<ApiView>>> = lib.solutions[index].apis.iter().map(|id| self.apis.get(id).filter(|a| !st.ctx.excluded_tools.contains(&a.tool) && !self.health.as_ref().is_some_and(|h| h.is_degraded(id))).cloned()).collect();
            // Valid: the request (or the user's values) can give the first API's inputs.
            if let Some(apis) = apis.filter(|a| a.first().is_some_and(|f| fill_arguments(&st.ctx, f).missing.is_empty())) {
                out.push(SolutionView { index, score, apis });
            }
            if out.len() >= want {
                break;
            }
        }
        out
    }

    /// Run a plan step by step. `Err((step, why))` (1-based) at the first step that cannot run:
    /// the search takes over from there, the steps before it kept.
    async fn execute_plan(&self, st: &mut RunState<'_>, plan: &Plan) -> Result<std::result::Result<(), (usize, String)>> {
        // Plan label (var1, var2, …) → the label of that step's (first) call on the path.
        let mut labels: HashMap<String, String> = HashMap::new();
        for (i, step) in plan.steps.iter().enumerate() {
            let n = i + 1;
            let Some(api) = self.apis.get(&step.api).filter(|_| !self.health.as_ref().is_some_and(|h| h.is_degraded(&step.api))).cloned() else {
                return Ok(Err((n, format!("{} is not an active API", step.api))));
            };
            let outputs: HashMap<String, &Value> = labels.iter().filter_map(|(pl, al)| st.ctx.path.iter().find(|s| &s.label == al).map(|s| (pl.clone(), s.response.as_ref()))).collect();
            if let Some(c) = &step.when {
                match crate::plan::program::holds(c, &outputs) {
                    Ok(true) => {}
                    Ok(false) => {
                        drop(outputs);
                        st.emit(TraceEvent::PlanSkipped { step: n, api: api.id.clone(), reason: format!("{} {} {} does not hold", c.reference, c.op, c.value) }).await;
                        continue;
                    }
                    Err(e) => return Ok(Err((n, e))),
                }
            }
            let items: Vec<Option<String>> = match &step.for_each {
                None => vec![None],
                Some(r) => {
                    let inner = match crate::plan::program::rewrite(&Value::String(r.clone()), &labels, None) {
                        Ok(Value::String(x)) => x.trim_matches('$').to_string(),
                        Ok(_) => return Ok(Err((n, "for_each is not a reference".into()))),
                        Err(e) => return Ok(Err((n, e))),
                    };
                    let (label, path) = inner.split_once('.').unwrap_or((inner.as_str(), ""));
                    let parts: Vec<&str> = if path.is_empty() { Vec::new() } else { path.split('.').collect() };
                    let list = st.ctx.path.iter().find(|s| s.label == label).and_then(|s| crate::exec::refs::lookup(&s.response, &parts).cloned());
                    match list {
                        Some(Value::Array(a)) if !a.is_empty() => (0..a.len().min(crate::plan::program::MAX_ITEMS)).map(|k| Some(format!("{inner}.{k}"))).collect(),
                        _ => return Ok(Err((n, format!("for_each {r} is not a non-empty list")))),
                    }
                }
            };
            drop(outputs);
            let mut first: Option<String> = None;
            for item in items {
                let ok = match &step.arguments {
                    None => self.call_api(st, &api, 0, true).await?,
                    Some(args) => {
                        let arguments = match crate::plan::program::rewrite(&Value::Object(args.clone()), &labels, item.as_deref()) {
                            Ok(Value::Object(m)) => m,
                            Ok(_) => Map::new(),
                            Err(e) => return Ok(Err((n, e))),
                        };
                        let mut f = Filled { arguments, ..Filled::default() };
                        for (k, v) in &f.arguments {
                            f.sources.insert(k.clone(), ArgSource::of_reference(v).unwrap_or(ArgSource::Given));
                        }
                        self.execute(st, &api, f).await
                    }
                };
                if !ok {
                    return Ok(Err((n, format!("step {n} ({}) failed", api.name))));
                }
                if first.is_none() {
                    first = st.ctx.path.last().map(|s| s.label.clone());
                }
            }
            if let Some(l) = first {
                labels.insert(format!("var{n}"), l);
            }
        }
        Ok(Ok(()))
    }

    /// Send one call; push it on the path when it succeeds with a usable response.
    async fn execute(&self, st: &mut RunState<'_>, api: &Arc<ApiView>, filled: Filled) -> bool {
        let Some(node) = self.graph.apis.get(&api.id) else { return false };
        let spec = CallSpec::from_node(node);
        let label = format!("var{}", st.next_label);
        if st.dry_run {
            return self.execute_dry(st, api, filled, label).await;
        }
        if let Some(approver) = st.approver.clone().filter(|a| a.requires(&api.id)) {
            let outputs: HashMap<String, &Value> = st.ctx.path.iter().map(|s| (s.label.clone(), s.response.as_ref())).collect();
            let resolved = crate::exec::refs::resolve(&filled.arguments, &outputs).unwrap_or_else(|_| filled.arguments.clone());
            drop(outputs);
            let call = PendingCall { api: api.id.clone(), name: api.name.clone(), arguments: resolved };
            st.emit(TraceEvent::AwaitingApproval { label: label.clone(), call: call.clone() }).await;
            let decision = approver.decide(&call).await;
            st.emit(TraceEvent::Approval { api: api.id.clone(), decision: decision.clone() }).await;
            if let ApprovalDecision::Rejected { by, reason } = decision {
                let error = CallError::NotApproved { by, reason };
                st.ctx.dead_ends.push(DeadEnd { api: api.id.clone(), arguments: filled.arguments.clone(), reason: error.to_string() });
                st.emit(TraceEvent::CallFailed { api: api.id.clone(), arguments: filled.arguments, error }).await;
                return false;
            }
        }
        st.emit(TraceEvent::Call { label: label.clone(), api: api.id.clone(), arguments: filled.arguments.clone(), sources: filled.sources.iter().map(|(k, v)| (k.clone(), v.clone())).collect() }).await;
        st.calls_made += 1;
        st.stats.http_calls += 1;
        let t = Instant::now();
        let outputs: HashMap<String, &Value> = st.ctx.path.iter().map(|s| (s.label.clone(), s.response.as_ref())).collect();
        let span = tracing::info_span!("tool_call", api = %api.id, label = %label);
        let result = {
            use tracing::Instrument;
            self.executor.call(&spec, &filled.arguments, &outputs).instrument(span.clone()).await
        };
        span.in_scope(|| match &result {
            Ok(o) => tracing::debug!(status = o.status, attempts = o.attempts, ms = o.elapsed_ms as u64, "tool call answered"),
            Err(e) => tracing::debug!(error = %e, "tool call failed"),
        });
        drop(outputs);
        st.stats.http_ms += t.elapsed().as_secs_f64() * 1000.0;
        let outcome = match result {
            Ok(o) => o,
            Err(error) => {
                st.stats.failed_calls += 1;
                st.ctx.dead_ends.push(DeadEnd { api: api.id.clone(), arguments: filled.arguments.clone(), reason: error.to_string() });
                st.emit(TraceEvent::CallFailed { api: api.id.clone(), arguments: filled.arguments, error }).await;
                return false;
            }
        };
        // An error-shaped response is a failed call; an empty one goes on the path, where the
        // judgement finds it and reflection resumes from it.
        if let Some(problem) = crate::exec::response_problem(&outcome.response) {
            st.stats.failed_calls += 1;
            st.ctx.dead_ends.push(DeadEnd { api: api.id.clone(), arguments: filled.arguments.clone(), reason: problem.clone() });
            st.emit(TraceEvent::CallFailed { api: api.id.clone(), arguments: filled.arguments, error: CallError::Rejected { status: outcome.status, body: problem } }).await;
            return false;
        }
        let next_params: Vec<String> = self.graph.successors(&api.id, self.settings.top_k).iter().filter_map(|s| self.apis.get(&s.id)).flat_map(|a| a.params.iter().map(|p| p.name.clone())).collect();
        let observation = compress(&outcome.response, &keep_set(&st.ctx.request, next_params.iter().map(String::as_str)), self.settings.observation_chars);
        let response = Arc::new(outcome.response);
        st.emit(TraceEvent::Response {
            label: label.clone(),
            api: api.id.clone(),
            status: outcome.status,
            attempts: outcome.attempts,
            elapsed_ms: outcome.elapsed_ms,
            observation: observation.clone(),
            response: response.clone(),
        })
        .await;
        let repeat = st.ctx.calls_of(&api.id);
        st.ctx.fields.insert(label.clone(), Arc::new(crate::plan::deterministic::FieldIndex::build(&response)));
        if let Some(i) = st.ctx.focus {
            st.ctx.step_subtask.insert(label.clone(), i);
        }
        st.sent.insert(label.clone(), outcome.arguments);
        st.ctx.path.push(Step { api: api.clone(), label, arguments: filled.arguments, sources: filled.sources, observation, response, repeat });
        st.next_label = st.ctx.path.len() + 1;
        true
    }

    /// A planned call in a dry run: on the path with the skeleton of its output as response.
    async fn execute_dry(&self, st: &mut RunState<'_>, api: &Arc<ApiView>, filled: Filled, label: String) -> bool {
        // Every dry call "succeeds": the same call twice would only loop (its answer would be
        // the same), so it is a dead end.
        if st.ctx.path.iter().any(|s| s.api.id == api.id && s.arguments == filled.arguments) {
            let reason = format!("{} was planned with the same arguments already", api.name);
            st.ctx.dead_ends.push(DeadEnd { api: api.id.clone(), arguments: filled.arguments.clone(), reason: reason.clone() });
            st.emit(TraceEvent::CallFailed { api: api.id.clone(), arguments: filled.arguments, error: CallError::BadRequest { message: reason } }).await;
            return false;
        }
        // Literal values are checked against the schema as a real call's are (references are
        // filled only when calls run).
        let literal: Map<String, Value> = filled.arguments.iter().filter(|(_, v)| !v.as_str().is_some_and(|s| s.contains('$'))).map(|(k, v)| (k.clone(), v.clone())).collect();
        let params: Vec<toolgraph_schema::ParamDoc> = api.params.iter().filter(|p| literal.contains_key(&p.name)).cloned().map(|mut p| {
            p.required = false;
            p
        }).collect();
        if let Err(problems) = crate::exec::validate(&params, &literal) {
            let error = CallError::InvalidArguments { problems };
            st.ctx.dead_ends.push(DeadEnd { api: api.id.clone(), arguments: filled.arguments.clone(), reason: error.to_string() });
            st.emit(TraceEvent::CallFailed { api: api.id.clone(), arguments: filled.arguments, error }).await;
            return false;
        }
        st.emit(TraceEvent::Call { label: label.clone(), api: api.id.clone(), arguments: filled.arguments.clone(), sources: filled.sources.iter().map(|(k, v)| (k.clone(), v.clone())).collect() }).await;
        st.calls_made += 1;
        let response = Arc::new(skeleton(&api.output_fields, &label));
        let observation = compress(&response, &keep_set(&st.ctx.request, std::iter::empty()), self.settings.observation_chars);
        st.emit(TraceEvent::Response { label: label.clone(), api: api.id.clone(), status: 0, attempts: 0, elapsed_ms: 0.0, observation: observation.clone(), response: response.clone() }).await;
        let repeat = st.ctx.calls_of(&api.id);
        st.ctx.fields.insert(label.clone(), Arc::new(crate::plan::deterministic::FieldIndex::build(&response)));
        if let Some(i) = st.ctx.focus {
            st.ctx.step_subtask.insert(label.clone(), i);
        }
        st.sent.insert(label.clone(), filled.arguments.clone());
        st.ctx.path.push(Step { api: api.clone(), label, arguments: filled.arguments, sources: filled.sources, observation, response, repeat });
        st.next_label = st.ctx.path.len() + 1;
        true
    }

    /// Replay a remembered chain: references kept, other arguments re-filled from this request.
    async fn replay(&self, st: &mut RunState<'_>, chain: &[MemoryStep]) -> std::result::Result<(), String> {
        for step in chain {
            let api = self.apis.get(&step.api).filter(|_| !self.health.as_ref().is_some_and(|h| h.is_degraded(&step.api))).cloned().ok_or_else(|| format!("{} is no longer an active API", step.api))?;
            let mut f = fill_arguments(&st.ctx, &api);
            for (name, source) in &step.sources {
                if matches!(source, ArgSource::Output { .. }) {
                    if let Some(v) = step.arguments.get(name) {
                        f.arguments.insert(name.clone(), v.clone());
                        f.sources.insert(name.clone(), source.clone());
                        f.missing.retain(|m| m != name);
                    }
                }
            }
            if !f.missing.is_empty() {
                return Err(format!("{} needs {} for this request", api.name, f.missing.join(", ")));
            }
            if !self.execute(st, &api, f).await {
                return Err(format!("the call to {} failed", api.name));
            }
        }
        let j = judge_path(&st.ctx);
        if !j.pass {
            return Err(j.reason);
        }
        Ok(())
    }

    /// The answer: the planner's; for a request searched subtask by subtask, in parts that say
    /// which subtask each answers. When the whole request asks for a quantity (a price compared
    /// across subtasks' calls …) the whole path's answer comes first and each part names the calls
    /// that served it; otherwise each part is composed from its own subtask's calls. An LLM's
    /// answer (one call) leads, the parts follow.
    async fn answer(&self, st: &RunState<'_>) -> Result<String> {
        let subtasks = &st.ctx.subtasks;
        if subtasks.len() < 2 || st.ctx.step_subtask.is_empty() {
            return st.planner.answer(&st.ctx).await;
        }
        let deterministic = st.planner.name() == "deterministic";
        let whole = !crate::plan::coverage::asked_quantities(&st.ctx.request).is_empty();
        let head = if !deterministic {
            Some(st.planner.answer(&st.ctx).await?)
        } else if whole {
            Some(crate::plan::deterministic::plain_answer(&st.ctx))
        } else {
            None
        };
        let mut parts = Vec::new();
        for (i, sub) in subtasks.iter().enumerate() {
            let steps: Vec<&Step> = st.ctx.path.iter().filter(|s| st.ctx.step_subtask.get(&s.label) == Some(&i)).collect();
            let text = if steps.is_empty() {
                "nothing found for this part".to_string()
            } else if head.is_some() {
                format!("served by {}", steps.iter().map(|s| format!("{} ({})", s.api.name, s.label)).collect::<Vec<_>>().join(", "))
            } else {
                let mut sc = st.ctx.clone();
                sc.request = sub.request.clone();
                sc.path.retain(|s| st.ctx.step_subtask.get(&s.label) == Some(&i));
                crate::plan::deterministic::plain_answer(&sc)
            };
            parts.push(format!("[{}] {} — {}\n{}", i + 1, sub.name, sub.request, text));
        }
        let by_part = parts.join("\n\n");
        Ok(match head {
            Some(h) => format!("{h}\n\n{by_part}"),
            None => by_part,
        })
    }

    async fn conclude(&self, st: RunState<'_>, ended: Ended, vector: &[f32], recalled: bool) -> Result<RunReport> {
        self.conclude_with(st, ended, vector, recalled, &self.settings).await
    }

    async fn conclude_with(&self, mut st: RunState<'_>, ended: Ended, vector: &[f32], recalled: bool, settings: &RunSettings) -> Result<RunReport> {
        let judgement = if st.ctx.path.is_empty() {
            None
        } else if recalled || st.deterministic_judge {
            Some(judge_path(&st.ctx))
        } else {
            st.stats.planner_calls += 1;
            Some(st.planner.judge(&st.ctx).await?)
        };
        if let Some(j) = &judgement {
            st.emit(TraceEvent::Judge { judgement: j.clone() }).await;
        }
        let passed = judgement.as_ref().is_some_and(|j| j.pass);
        let some_good = st.ctx.path.iter().any(|s| crate::plan::deterministic::bad_response(&s.response).is_none());
        // Answered only when judged complete. Only a missing value blocked the run (no tool
        // failed): ask the user; some usable calls: partial; otherwise give up (the report still
        // names the missing value).
        let status = if st.ctx.path.is_empty() {
            if st.needs_input.is_some() && st.stats.failed_calls == 0 {
                Status::NeedsInput
            } else {
                Status::GaveUp
            }
        } else if passed {
            Status::Answered
        } else if st.needs_input.is_some() && st.stats.failed_calls == 0 {
            Status::NeedsInput
        } else if some_good {
            Status::Partial
        } else {
            Status::GaveUp
        };
        let answer = match status {
            // A dry run has no results to write an answer from: it says what it planned.
            Status::Answered if st.dry_run => {
                let a = crate::plan::answer::planned(&st.ctx);
                st.emit(TraceEvent::Finish { answer: a.clone() }).await;
                a
            }
            Status::Answered => {
                if !recalled {
                    st.stats.planner_calls += 1;
                }
                let a = if recalled { crate::plan::deterministic::plain_answer(&st.ctx) } else { self.answer(&st).await? };
                st.emit(TraceEvent::Finish { answer: a.clone() }).await;
                a
            }
            Status::Partial => {
                if !recalled && !st.dry_run {
                    st.stats.planner_calls += 1;
                }
                let done = if st.dry_run {
                    crate::plan::answer::planned(&st.ctx)
                } else if recalled {
                    crate::plan::deterministic::plain_answer(&st.ctx)
                } else {
                    self.answer(&st).await?
                };
                let missing = judgement.as_ref().map(|j| if j.complete() { j.reason.clone() } else { crate::plan::coverage::missing_text(&j.coverage) }).unwrap_or_default();
                let a = format!("Partly done; not covered: {missing}.\n{done}");
                st.emit(TraceEvent::Finish { answer: a.clone() }).await;
                a
            }
            Status::NeedsInput => st.needs_input.as_ref().map(|n| n.message.clone()).unwrap_or_default(),
            Status::GaveUp => {
                let reason = match &ended {
                    Ended::GaveUp(r) => r.clone(),
                    Ended::Finished => "no API call succeeded".to_string(),
                };
                st.emit(TraceEvent::GiveUp { reason: reason.clone() }).await;
                reason
            }
        };
        // Long-term memory of runs judged complete (the graph learns in `learn_from`, once per run).
        if judgement.is_some() && !recalled {
            // Only a run judged complete is a plan worth recalling.
            if status == Status::Answered && settings.remember && !st.dry_run {
                if let Some(mem) = &self.memory {
                    let chain = st.ctx.path.iter().map(|s| MemoryStep { api: s.api.id.clone(), arguments: s.arguments.clone(), sources: s.sources.clone() }).collect();
                    mem.remember(&st.ctx.request, vector.to_vec(), chain).await?;
                }
            }
        }
        let chain = st
            .ctx
            .path
            .iter()
            .map(|s| ChainCall { label: s.label.clone(), api: s.api.id.clone(), name: s.api.name.clone(), arguments: s.arguments.clone(), sent: st.sent.get(&s.label).cloned().unwrap_or_default(), subtask: st.ctx.step_subtask.get(&s.label).copied() })
            .collect();
        st.stats.total_ms = st.started.elapsed().as_secs_f64() * 1000.0;
        st.stats.engine_ms = (st.stats.total_ms - st.stats.http_ms - st.stats.embed_ms).max(0.0);
        let responses = st.ctx.path.iter().map(|s| s.response.clone()).collect();
        Ok(RunReport { request: st.ctx.request.clone(), status, answer, chain, needs_input: st.needs_input.clone(), judgement, trace: st.trace, stats: st.stats, responses })
    }
}
