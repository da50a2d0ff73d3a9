//! A run (thesis Algorithm 4.1): recall a long-term memory or decompose the request, retrieve seed
//! tools, search the tool graph depth-first — call an API, offer its top-K successors by blended
//! weight (filled up to K from the retriever), let the planner choose next / backtrack / finish /
//! give up — reflect on failure, remember what worked, update the dynamic weights, answer.
//! Every step goes to the trace, and to a stream when one is given.
//!
//! One file per phase, in the order a run goes through them: [`recall`] (long-term memory, replay),
//! [`seeds`] (decomposition and retrieval), [`plans`] (plan mode and a person's chains),
//! [`search`] (the depth-first search), [`reverse`] (Reverse Chain), [`calls`] (sending one call),
//! [`reflect`] (judgement rounds), [`conclude`] (status, answer, memory, report); [`report`] holds
//! the types a run takes and gives. The engine asks planners only through the
//! [`Planner`](crate::plan::Planner) port; the rules every planner shares live in `plan::{fill,
//! judge, decompose, answer}`.

pub mod args;
mod calls;
mod conclude;
pub mod health;
pub mod learn;
pub mod memory;
mod plans;
mod providers;
mod recall;
mod reflect;
pub mod report;
mod reverse;
mod search;
mod seeds;
pub mod trace;

use crate::exec::Executor;
use crate::graph::{weights, GraphStore};
use crate::plan::learned::ArgModel;
use crate::plan::program::SolutionLibrary;
use crate::plan::values::RequestValues;
use crate::plan::{ApiView, Context, Planner};
use crate::retrieval::hybrid::Retriever;
use crate::Result;
use memory::Memory;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use toolgraph_schema::{GraphSnapshot, WeightSettings, END_ID, STATUS_ACTIVE};
use trace::TraceEvent;

pub use calls::skeleton;
pub use report::{
    ApprovalDecision, Approver, ChainCall, NeedsInput, PendingCall, RunLearning, RunOptions, RunReport, RunStats,
    Status,
};
pub use toolgraph_schema::{Mode, RunSettings};

/// Memory entries the argument model learns from when the store holds none (the newest are not
/// preferred: a memory lists in its own order).
pub const MAX_ARG_EXAMPLES: usize = 50_000;

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
    /// Where arguments come from: the model stored with the graph (trained by `ingest`, updated
    /// by every run remembered), read when the first run needs it; see [`args`].
    args: std::sync::RwLock<Option<Arc<ArgModel>>>,
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
    /// Calls that failed in this run — API id and arguments as sent — with why: never sent again.
    failed: HashMap<String, String>,
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
    /// The judgement of a memory replayed by analogy (its requirements weighed against the
    /// remembered request's).
    recalled_judgement: Option<crate::plan::Judgement>,
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
                v.ends = seen.then(|| {
                    p.graph.next.get(&(a.id.clone(), END_ID.to_string())).map(|e| e.static_weight).unwrap_or(0.0)
                });
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
            args: std::sync::RwLock::new(None),
        }
    }

    /// The same engine over a newer graph (counts, weights and statuses learned since).
    pub fn rebuilt(&self, graph: Arc<GraphSnapshot>) -> Engine {
        let e = self.rebuilt_parts(graph);
        *e.args.write().unwrap_or_else(|p| p.into_inner()) =
            self.args.read().unwrap_or_else(|p| p.into_inner()).clone();
        e
    }

    fn rebuilt_parts(&self, graph: Arc<GraphSnapshot>) -> Engine {
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
    /// marked `degraded` in the graph, logged), then — with `run.learn` — calls, successes, the
    /// answered chain and the argument model's counts (a run judged complete) into the graph,
    /// once per run id ([`learn::learn_run`]).
    pub async fn learn_from(&self, run_id: &str, report: &RunReport) -> Result<RunLearning> {
        self.learn_from_caller(run_id, report, None).await
    }

    /// [`Engine::learn_from`] a run made for `caller` (a daemon's user): API health weighs
    /// callers apart, so one caller's failures do not take an API away from the others.
    pub async fn learn_from_caller(
        &self,
        run_id: &str,
        report: &RunReport,
        caller: Option<&str>,
    ) -> Result<RunLearning> {
        let mut out = RunLearning::default();
        // A planned-only run sent nothing: there is nothing to learn from.
        if report.stats.dry_run {
            return Ok(out);
        }
        let Some(store) = &self.store else {
            if self.settings.learn && learn::teaches(report) {
                let chain: Vec<memory::MemoryStep> = report
                    .chain
                    .iter()
                    .map(|c| memory::MemoryStep {
                        api: c.api.clone(),
                        arguments: c.arguments.clone(),
                        sources: Default::default(),
                    })
                    .collect();
                self.learn_args_in_place(&report.request, &chain);
            }
            return Ok(out);
        };
        let _one = self.learning.lock().await;
        if let Some(h) = &self.health {
            for change in h.observe(&learn::sent_calls(report), caller) {
                if store.set_api_status(&change).await? {
                    tracing::warn!(api = %change.id, status = %change.status, reason = %change.reason, "API status changed");
                    out.status_changes.push(change);
                }
            }
        }
        if self.settings.learn {
            // The argument model in use learns too (read first: its increments are relative to it).
            if learn::teaches(report) {
                if let Err(e) = self.arg_model().await {
                    tracing::warn!(error = %e, "reading the argument model failed: this run teaches the graph's counts only");
                }
            }
            let teaches = args::RunTeaches(self);
            out.learned = learn::learn_run(store.as_ref(), run_id, report, self.weights, Some(&teaches)).await?;
            // The judgement's evaluation moves the dynamic weights (once: with the run's counts).
            if out.learned.applied && !report.stats.recalled {
                if let Some(j) = &report.judgement {
                    let deltas: Vec<(String, f64)> =
                        j.deltas.iter().filter(|(id, _)| self.apis.contains_key(id)).cloned().collect();
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
    pub async fn run(
        &self,
        request: &str,
        given: Map<String, Value>,
        sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>,
    ) -> Result<RunReport> {
        self.run_turn(request, given, Vec::new(), sink).await
    }

    /// [`Engine::run`] as one turn of a conversation: `earlier` holds outputs of the session's
    /// earlier turns, which may fill arguments this request gives no value for.
    pub async fn run_turn(
        &self,
        request: &str,
        given: Map<String, Value>,
        earlier: Vec<crate::plan::Earlier>,
        sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>,
    ) -> Result<RunReport> {
        self.run_with(request, given, earlier, sink, RunOptions::default()).await
    }

    /// [`Engine::run_turn`] with per-request choices (planner, mode, target-first). LLM calls and
    /// tokens of this run are counted per model into its stats.
    pub async fn run_with(
        &self,
        request: &str,
        given: Map<String, Value>,
        earlier: Vec<crate::plan::Earlier>,
        sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>,
        opts: RunOptions,
    ) -> Result<RunReport> {
        let usage: crate::plan::RunUsage = Default::default();
        let mut r =
            crate::plan::RUN_USAGE.scope(usage.clone(), self.run_inner(request, given, earlier, sink, opts)).await?;
        r.stats.llm = usage.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(r)
    }

    /// A fresh run's state: the request's context with the given values and earlier turns.
    fn new_state<'a>(
        &self,
        request: &str,
        given: Map<String, Value>,
        earlier: Vec<crate::plan::Earlier>,
        sink: Option<&'a tokio::sync::mpsc::Sender<TraceEvent>>,
        opts: &RunOptions,
    ) -> RunState<'a> {
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
            failed: HashMap::new(),
            planner: opts.planner.clone().unwrap_or_else(|| self.planner.clone()),
            mode: opts.mode.unwrap_or(self.settings.mode),
            backward: opts.backward.unwrap_or(self.settings.backward),
            inserting: Vec::new(),
            subtask_seeds: Vec::new(),
            subtask_sims: Vec::new(),
            deterministic_judge: false,
            approver: opts.approver.clone(),
            dry_run: opts.dry_run,
            recalled_judgement: None,
        }
    }

    async fn run_inner(
        &self,
        request: &str,
        given: Map<String, Value>,
        earlier: Vec<crate::plan::Earlier>,
        sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>,
        opts: RunOptions,
    ) -> Result<RunReport> {
        let mut st = self.new_state(request, given, earlier, sink, &opts);
        if self.settings.learned_arguments {
            st.ctx.args = self.arg_model().await?;
        }
        st.stats.dry_run = st.dry_run;
        let t = Instant::now();
        // The request's words (what retrieval reads) and its meaning, mentions masked (what the
        // long-term memory compares), embedded together.
        let mut both = self
            .retriever
            .embedder()
            .embed(vec![request.to_string(), crate::plan::reading::meaning_text(request)])
            .await?
            .into_iter();
        let (vector, meaning) = (both.next().unwrap_or_default(), both.next().unwrap_or_default());
        st.stats.embed_ms += t.elapsed().as_secs_f64() * 1000.0;
        // Long-term memory: a close enough hit is replayed with zero planning calls.
        if self.recall(&mut st, &meaning).await? {
            return self.conclude(st, Ended::Finished, &meaning, true).await;
        }
        // After a replay that went part of the way, one search goes on from its calls (the
        // subtasks' own searches would start over around them).
        let per_subtask = self.retrieve_seeds(&mut st, &vector).await? && st.ctx.path.is_empty();
        // Plan mode plans from the solution library unless a remembered plan already went part
        // of the way (the search goes on from its calls).
        if st.mode == Mode::Plan && st.ctx.path.is_empty() && self.run_plan(&mut st).await? {
            st.deterministic_judge = true;
            return self.conclude(st, Ended::Finished, &meaning, false).await;
        }
        let ended = self.search_and_reflect(&mut st, per_subtask).await?;
        self.conclude(st, ended, &meaning, false).await
    }
}
