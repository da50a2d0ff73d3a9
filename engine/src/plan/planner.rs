//! The planner port itself: the [`Planner`] trait and what it decides over (the run's [`Context`],
//! the [`Candidate`]s, the [`Step`]s taken), shared by every planner and by the engine.

use crate::read::values::RequestValues;
use crate::Result;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use toolgraph_schema::{ApiNode, ParamDoc};

/// An API as the planner sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiView {
    /// Its id (`category/tool/name`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its tool.
    pub tool: String,
    /// Its category.
    pub category: String,
    /// What its docs say it does.
    pub description: String,
    /// Its parameters.
    pub params: Vec<ParamDoc>,
    /// The fields its responses were seen to have.
    pub output_fields: Vec<String>,
    /// successes / calls seen in trajectories; `None` before any call.
    pub availability: Option<f64>,
    /// The static weight of its `NEXT` edge to `END` (how often chains stop after it); `None`
    /// when the graph has seen no chain through it.
    #[serde(default)]
    pub ends: Option<f64>,
}

/// The share of the chains through an API that ended after it, below which it is a lookup
/// ([`ApiView::is_lookup`]): a chain's last API must have ended at least this share.
pub(crate) const MIN_END_WEIGHT: f64 = 0.05;

impl ApiView {
    /// A lookup: chains were seen to go on after it (almost) always (a location search), so it
    /// serves a request only through the call that reads it.
    pub(crate) fn is_lookup(&self) -> bool {
        self.ends.is_some_and(|w| w < MIN_END_WEIGHT)
    }

    /// The view of a graph node.
    pub fn from_node(n: &ApiNode) -> Self {
        ApiView {
            id: n.id.clone(),
            name: n.name.clone(),
            tool: n.tool.clone(),
            category: n.category.clone(),
            description: n.description.clone(),
            params: serde_json::from_str(&n.parameters).unwrap_or_default(),
            output_fields: n.output_fields.clone(),
            availability: n.availability(),
            ends: None,
        }
    }
}

/// Where a candidate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A NEXT successor of the current node in the tool graph.
    Graph,
    /// Filled in by the retriever (seed tools, or successors beyond the graph's).
    Retriever,
}

/// One option offered to the planner at a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// API id, or `END` for "the chain is complete".
    pub id: String,
    /// The graph or the retriever.
    pub source: Source,
    /// Blended NEXT weight from the current node (0 for retriever candidates).
    pub weight: f64,
    /// Retrieval similarity to the (sub)task, max-normalized to [0, 1].
    pub similarity: f64,
    /// Evidence from recalled long-term memories: the best recall score of a remembered chain
    /// that made this same step (0 when none).
    #[serde(default)]
    pub hint: f64,
    /// The API, absent for `END`.
    pub api: Option<Arc<ApiView>>,
}

impl Candidate {
    /// Whether it is `END` (finish).
    pub fn is_end(&self) -> bool {
        self.api.is_none()
    }
}

/// What the planner decides at a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Decision {
    /// Call candidate `index` of the list offered.
    Call {
        /// Which candidate.
        index: usize,
        /// Why.
        reason: String,
    },
    /// The request is served: stop and answer.
    Finish {
        /// Why.
        reason: String,
    },
    /// This branch is a dead end: go back one step.
    Backtrack {
        /// Why.
        reason: String,
    },
    /// Nothing more can be done.
    GiveUp {
        /// Why.
        reason: String,
    },
}

/// Where one argument's value came from (kept with long-term memories, so a replay re-fills it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum ArgSource {
    /// A field of an earlier call's output: `$label.path$`.
    Output {
        /// The output (`var1`).
        label: String,
        /// The field's path in it.
        path: String,
    },
    /// A value found in the request.
    Request {
        /// What kind of mention (`date`, `time`, `number`, `name`, `email`…).
        kind: String,
    },
    /// The parameter's documented default, or the constant recorded runs always send it with.
    Default,
    /// Given by the user (needs_input answers) or by an LLM.
    Given,
    /// A field of an output from an earlier turn of the session (a literal value: references
    /// point only into this run's path).
    Earlier {
        /// The turn.
        turn: usize,
        /// The API whose output it was.
        api: String,
        /// The field's path in that output.
        path: String,
    },
}

impl ArgSource {
    /// The source of a value that references an earlier output (`$label.path$`), if it does.
    pub fn of_reference(v: &Value) -> Option<ArgSource> {
        let r = crate::exec::refs::Reference::all_in(v.as_str()?).into_iter().next()?;
        Some(ArgSource::Output { label: r.label, path: r.path })
    }
}

/// Filled arguments of one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Filled {
    /// Values, possibly holding `$label.path$` references to earlier outputs.
    pub arguments: Map<String, Value>,
    /// Where each argument came from.
    pub sources: HashMap<String, ArgSource>,
    /// Required parameters no source could fill (each gets a provider call, else the user is asked).
    pub missing: Vec<String>,
    /// Missing parameters the planner says come from another API's output (Reverse Chain).
    #[serde(default)]
    pub from_api: Vec<ProviderPick>,
    /// Missing parameters the planner says only the user can give (no provider is tried).
    #[serde(default)]
    pub ask_user: Vec<String>,
}

/// "Parameter `param` comes from API `api`'s output field `field`" (Reverse Chain).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderPick {
    /// The parameter.
    pub param: String,
    /// API id.
    pub api: String,
    /// The field of that API's output.
    pub field: String,
}

/// The APIs that can provide one required parameter of the API being filled, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// The parameter.
    pub param: String,
    /// APIs whose output has a field that feeds it, best first.
    pub providers: Vec<Arc<ApiView>>,
}

/// A subtask of a request (thesis §4.3): what it asks, in which category, and a rewritten
/// request that stands on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subtask {
    /// A short name.
    pub name: String,
    /// What it asks for.
    pub description: String,
    /// A tool category (as the graph names them) the subtask's APIs should come from.
    #[serde(default)]
    pub category: Option<String>,
    /// The subtask as a self-contained request (the user's names, places and dates kept).
    pub request: String,
}

impl Subtask {
    /// A subtask that is just `text`.
    pub fn of_text(i: usize, text: &str) -> Self {
        Subtask {
            name: format!("subtask {}", i + 1),
            description: text.to_string(),
            category: None,
            request: text.to_string(),
        }
    }
}

/// One executed step of the current path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The API called.
    pub api: Arc<ApiView>,
    /// The output's name for references (`var1`, `var2`, …).
    pub label: String,
    /// Arguments as planned (references kept).
    pub arguments: Map<String, Value>,
    /// Where each argument came from.
    pub sources: HashMap<String, ArgSource>,
    /// The response the planner sees (compressed to the configured length).
    pub observation: String,
    /// The full response (shared with the trace).
    pub response: Arc<Value>,
    /// How many earlier steps of the path called the same API.
    pub repeat: usize,
}

/// A backtrack and why, kept so the planner does not retry a dead branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadEnd {
    /// The API called.
    pub api: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// Why the branch ended.
    pub reason: String,
}

/// Short-term memory of a run: everything the planner may look at.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub(crate) request: String,
    pub(crate) subtasks: Vec<Subtask>,
    /// The subtask being searched now (per-subtask search), as an index into `subtasks`.
    pub(crate) focus: Option<usize>,
    /// Path length where the current (subtask's) search started: nothing before it is undone.
    pub(crate) root: usize,
    /// The subtask each step served (per-subtask search), by step label.
    pub(crate) step_subtask: HashMap<String, usize>,
    pub(crate) values: RequestValues,
    pub(crate) path: Vec<Step>,
    pub(crate) dead_ends: Vec<DeadEnd>,
    /// Tools (ids) excluded by reflection.
    pub(crate) excluded_tools: Vec<String>,
    /// APIs (ids) excluded by reflection (where excluding their whole tool would leave nothing).
    pub(crate) excluded_apis: Vec<String>,
    /// Failure reasons carried into a resumed round.
    pub(crate) notes: Vec<String>,
    /// Values the user gave for parameters (`needs_input` answers), by parameter name.
    pub(crate) given: Map<String, Value>,
    /// Field indexes of the path's responses by label (built once per step by the engine).
    pub(crate) fields: HashMap<String, Arc<crate::fill::fields::FieldIndex>>,
    /// Outputs of earlier turns of a conversation (most recent last): arguments no value of this
    /// request provides may come from them.
    pub(crate) earlier: Vec<Earlier>,
    /// Each subtask of a request that has several, with the APIs retrieval finds for it (best
    /// first): a subtask none of whose APIs was called is not covered.
    pub(crate) subtask_apis: Vec<(String, Vec<String>)>,
    /// The APIs the request's words ask for (learned, see [`crate::read::asks`]): a path without a
    /// call of one (or of another API about the same word) is not done.
    pub(crate) asked_apis: Vec<crate::read::asks::Asked>,
    /// Where arguments come from, learned from recorded runs (`None`: the rules alone).
    pub(crate) args: Option<Arc<crate::fill::learned::ArgModel>>,
    /// The dates the request says only where it states, not where it asks (the trip's days
    /// around "find the two highest-rated galleries"): they serve a call that takes a date, but
    /// no call is owed to them (`run::seeds::context_dates`).
    pub(crate) context_dates: Vec<chrono::NaiveDate>,
}

/// One output of an earlier turn of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Earlier {
    /// The turn it came from (1 for the first).
    pub turn: usize,
    /// That turn's request.
    pub request: String,
    /// The API that returned it.
    pub api: String,
    /// The response.
    pub response: Arc<Value>,
    /// The response's fields, indexed once.
    pub fields: Arc<crate::fill::fields::FieldIndex>,
}

impl Earlier {
    /// An output of turn `turn`.
    pub fn new(turn: usize, request: &str, api: &str, response: Arc<Value>) -> Self {
        let fields = Arc::new(crate::fill::fields::FieldIndex::build(&response));
        Earlier { turn, request: request.to_string(), api: api.to_string(), response, fields }
    }
}

impl Context {
    /// The asks of the request's words that no call on the path serves yet.
    pub(crate) fn asks_left(&self) -> impl Iterator<Item = &crate::read::asks::Asked> {
        self.asked_apis.iter().filter(|a| !self.path.iter().any(|s| a.served_by(&s.api.id)))
    }

    /// The context of a run of `request`, whose typed reading is `values`; nothing done yet.
    pub fn new(request: &str, values: RequestValues) -> Self {
        Context {
            request: request.to_string(),
            subtasks: Vec::new(),
            focus: None,
            root: 0,
            step_subtask: HashMap::new(),
            values,
            path: Vec::new(),
            dead_ends: Vec::new(),
            excluded_tools: Vec::new(),
            excluded_apis: Vec::new(),
            notes: Vec::new(),
            given: Map::new(),
            fields: HashMap::new(),
            earlier: Vec::new(),
            subtask_apis: Vec::new(),
            asked_apis: Vec::new(),
            args: None,
            context_dates: Vec::new(),
        }
    }

    /// The request being planned.
    pub fn request(&self) -> &str {
        &self.request
    }

    /// Puts another request in its place (a conversation's next turn, a prompt's test).
    pub fn set_request(&mut self, request: String) {
        self.request = request;
    }

    /// The calls made so far, in order.
    pub fn path(&self) -> &[Step] {
        &self.path
    }

    /// Adds a call made to the path.
    pub fn push_step(&mut self, step: Step) {
        self.path.push(step);
    }

    /// Forgets the calls made (a restart).
    pub fn clear_path(&mut self) {
        self.path.clear();
    }

    /// Records a call that failed or was judged wrong: the planner does not repeat it.
    pub fn push_dead_end(&mut self, dead_end: DeadEnd) {
        self.dead_ends.push(dead_end);
    }

    /// Carries a failure's reason into the next round of a reflection.
    pub fn push_note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// How often the path already called `api_id`.
    pub fn calls_of(&self, api_id: &str) -> usize {
        self.path.iter().filter(|s| s.api.id == api_id).count()
    }
}

/// The verdict on a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// Whether the run served the request.
    pub pass: bool,
    /// 0..1.
    pub grade: f64,
    /// Index into the path of the first step that went wrong.
    pub first_bad_step: Option<usize>,
    /// Tool ids judged irrelevant to the request.
    pub irrelevant_tools: Vec<String>,
    /// Per-API score change Δ ∈ [-3, 3] for the dynamic weights.
    pub deltas: Vec<(String, f64)>,
    /// Why, in a sentence.
    pub reason: String,
    /// What the request asks for and which call covers it ([`coverage`]); `pass` needs all.
    #[serde(default)]
    pub coverage: Vec<crate::read::requirement::Requirement>,
}

impl Judgement {
    /// Whether every requirement of the request is covered.
    pub fn complete(&self) -> bool {
        crate::read::requirement::complete(&self.coverage)
    }
}

/// Planner usage counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Decisions asked of the planner.
    pub calls: u64,
    /// Prompt tokens spent.
    pub prompt_tokens: u64,
    /// Completion tokens spent.
    pub completion_tokens: u64,
    /// Answers rejected by validation (never executed).
    pub rejected: u64,
}

/// LLM calls and tokens of one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Completions asked.
    pub calls: u64,
    /// Prompt tokens spent.
    pub prompt_tokens: u64,
    /// Completion tokens spent.
    pub completion_tokens: u64,
    /// Milliseconds spent waiting for completions (retries included).
    #[serde(default)]
    pub ms: u64,
}

/// Milliseconds the current run has spent in LLM completions so far (0 outside a run).
pub fn run_llm_ms() -> u64 {
    RUN_USAGE.try_with(|u| u.lock().unwrap_or_else(|p| p.into_inner()).values().map(|m| m.ms).sum()).unwrap_or(0)
}

/// Per-model usage of the run the current task executes (the engine scopes one per run; an LLM
/// planner adds to it), so concurrent runs on one planner count apart.
pub type RunUsage = Arc<std::sync::Mutex<std::collections::BTreeMap<String, ModelUsage>>>;

tokio::task_local! {
    /// The usage of the run the current task executes.
    pub static RUN_USAGE: RunUsage;
}

/// A remembered (request → chain) pair offered to the planner where the reading is unsure which
/// one serves the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryView {
    /// The remembered request.
    pub request: String,
    /// The APIs its chain called, in order (names).
    pub chain: Vec<String>,
}

/// What the planner answers when offered remembered chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "pick", content = "index", rename_all = "snake_case")]
pub enum Recollection {
    /// Replay `memories[i]`.
    Replay(usize),
    /// None of them asks for what this request asks: search instead.
    Neither,
}

/// Mentions of one kind the reading could not align for sure: what the remembered request said
/// (`old`, each with the words before it) and this request's mentions it may correspond to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnsureMentions {
    /// `name` (of a place, a hotel…), `number`, `date` or `time` (what the prompt calls them).
    pub kind: String,
    /// The remembered request's mentions, each with the words before it.
    pub old: Vec<String>,
    /// This request's mentions they may correspond to.
    pub new: Vec<String>,
    /// The rules' alignment: for each old mention, the index of its counterpart in `new`.
    pub guess: Vec<usize>,
}

/// The decisions of a run.
#[async_trait]
pub trait Planner: Send + Sync {
    /// Its name in reports.
    fn name(&self) -> &'static str;
    /// Split a request into subtasks (one when it cannot be split).
    async fn decompose(&self, ctx: &Context) -> Result<Vec<Subtask>>;
    /// Choose among `candidates` at the current node (the root when the path is empty).
    async fn choose(&self, ctx: &Context, candidates: &[Candidate]) -> Result<Decision>;
    /// Fill the arguments of a call to `api`. `offers` lists, per required parameter, the APIs
    /// whose output can provide it (only when [`Planner::wants_offers`]): a parameter may be
    /// answered with a value, "comes from API X's field F", or "ask the user".
    async fn fill(&self, ctx: &Context, api: &ApiView, offers: &[Offer]) -> Result<Filled>;
    /// Whether [`Planner::fill`] looks at provider offers (computing them costs a lookup per parameter).
    fn wants_offers(&self) -> bool {
        false
    }
    /// Whether [`Planner::fill`] fills by the shared rules alone ([`crate::fill::filler`]): then a
    /// call's providers can be looked at before any is called.
    fn fills_by_rules(&self) -> bool {
        false
    }
    /// A whole plan in one decision (plan mode): a program over the closest solutions, or `None`
    /// when no solution fits the request.
    async fn plan(&self, ctx: &Context, solutions: &[SolutionView]) -> Result<Option<Plan>>;
    /// Where the reading is unsure which of these remembered chains serves the request (two or
    /// three close by meaning, each transferable, with different chains): which to replay.
    /// `None`: the rules' order stands (the deterministic planner never overrides it).
    async fn choose_memory(&self, _ctx: &Context, _old: &[MemoryView]) -> Result<Option<Recollection>> {
        Ok(None)
    }
    /// Where the reading is unsure which of this request's mentions plays the role each of the
    /// remembered request's mentions played (`old_request`): for each `unsure.old[i]` the index
    /// of its counterpart in `unsure.new` (all distinct). `None`: the rules' alignment stands.
    async fn align_mentions(
        &self,
        _ctx: &Context,
        _old_request: &str,
        _unsure: &UnsureMentions,
    ) -> Result<Option<Vec<usize>>> {
        Ok(None)
    }
    /// Where no learned cue decides which of these 2–5 APIs (all about the request's `word`) it
    /// asks for: the index of the one it does. `None`: the rules' choice stands (the
    /// deterministic planner never overrides it).
    async fn choose_api(&self, _ctx: &Context, _word: &str, _apis: &[ApiView]) -> Result<Option<usize>> {
        Ok(None)
    }
    /// Judge the finished path.
    async fn judge(&self, ctx: &Context) -> Result<Judgement>;
    /// The final answer from the path's observations.
    async fn answer(&self, ctx: &Context) -> Result<String>;
    /// Whether [`Planner::answer`] composes from the results alone (no model, no cost): the engine
    /// then answers a request searched subtask by subtask part by part with the same composer
    /// ([`super::answer::compose`]); otherwise it asks the planner once for the whole and lists which
    /// calls served each part.
    fn composes_answers(&self) -> bool {
        false
    }
    /// Counters so far (the planner is shared by one run at a time or counts atomically).
    fn usage(&self) -> Usage;
}

/// A solution as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SolutionView {
    /// Index in the library.
    pub index: usize,
    /// How near it is to the request.
    pub score: f64,
    /// Its APIs, in order.
    pub apis: Vec<Arc<ApiView>>,
}

/// A condition on an earlier output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// `$varN.path$`.
    #[serde(rename = "ref")]
    pub reference: String,
    /// `exists`, `nonempty`, `eq`, `ne`, `gt`, `lt`.
    pub op: String,
    #[serde(default)]
    /// The value compared with (`eq`, `ne`, `gt`, `lt`).
    pub value: Value,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanStep {
    /// API id.
    pub api: String,
    /// The arguments; `None`: filled when the step runs (deterministic plans).
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    /// `$varN.path$` of a list: run once per element (`$item.path$` in the arguments).
    #[serde(default)]
    pub for_each: Option<String>,
    /// Run only when this holds.
    #[serde(default, rename = "if")]
    pub when: Option<Condition>,
}

/// A whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
    /// The library solution it came from, when it did.
    pub solution: Option<usize>,
    /// Who wrote it: `deterministic` or the planner's name.
    pub source: String,
}

/// Clamp a judged score change to the allowed range.
pub fn clamp_delta(d: f64) -> f64 {
    if d.is_finite() {
        d.clamp(-crate::graph::weights::MAX_DELTA, crate::graph::weights::MAX_DELTA)
    } else {
        0.0
    }
}
