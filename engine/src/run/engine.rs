use super::report::{Approver, NeedsInput, RunOptions, RunReport, RunStats};
use super::trace::{ReadAs, TraceEvent};
use crate::exec::Executor;
use crate::fill::learned::ArgModel;
use crate::graph::GraphStore;
use crate::memory::store::Memory;
use crate::plan::program::SolutionLibrary;
use crate::plan::{ApiView, Context, Planner};
use crate::read::asks::Asked;
use crate::read::values::RequestValues;
use crate::retrieval::hybrid::Retriever;
use crate::Result;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use toolgraph_schema::{GraphSnapshot, WeightSettings, END_ID, STATUS_ACTIVE};
use toolgraph_schema::{Mode, RunSettings};

/// Memory entries the argument model learns from when the store holds none (the newest are not
/// preferred: a memory lists in its own order).
pub const MAX_ARG_EXAMPLES: usize = 50_000;

/// The orchestration engine over one loaded graph.
pub struct Engine {
    pub(crate) graph: Arc<GraphSnapshot>,
    pub(crate) apis: HashMap<String, Arc<ApiView>>,
    pub(crate) providers: crate::fill::providers::Providers,
    pub(crate) store: Option<Arc<dyn GraphStore>>,
    pub(crate) retriever: Arc<Retriever>,
    pub(crate) memory: Option<Arc<Memory>>,
    pub(crate) executor: Executor,
    pub(crate) planner: Arc<dyn Planner>,
    pub(crate) settings: RunSettings,
    pub(crate) weights: WeightSettings,
    pub(crate) health: Option<Arc<super::health::Health>>,
    /// Learning from runs is serialized (ledger check, counts, weights).
    pub(crate) learning: tokio::sync::Mutex<()>,
    /// Plan mode's solution library, derived from the graph when first needed.
    pub(crate) solutions: std::sync::OnceLock<SolutionLibrary>,
    /// Where arguments come from: the model stored with the graph (trained by `ingest`, updated
    /// by every run remembered), read when the first run needs it; see [`args`].
    pub(crate) args: std::sync::RwLock<Option<Arc<ArgModel>>>,
    /// Word → the active APIs whose name or description uses it (what an asked word may be
    /// served by; see [`crate::read::asks`]).
    pub(crate) documented: HashMap<String, Vec<String>>,
    /// API id → the words of its name and description (read once a graph, see
    /// [`crate::read::asks::doc_words`]).
    pub(crate) doc_words: HashMap<String, Vec<String>>,
    /// The APIs a request may ask for by name ([`crate::read::named`]).
    pub(crate) named: crate::read::named::NameIndex,
    /// Today where a request does not say it (`run.today`, else the system's).
    pub(crate) clock: crate::clock::Clock,
    /// The readings of remembered requests, as replays weigh them (see [`Self::read_old`]).
    /// Request → the day it was read on and its reading.
    pub(crate) old_readings: std::sync::Mutex<HashMap<String, (chrono::NaiveDate, Arc<RequestValues>)>>,
    /// What remembered requests' words ask for ([`Self::asked_in`]), under the argument model
    /// they were read with (held, so a newer model reads them anew).
    pub(crate) old_asks: std::sync::Mutex<OldAsks>,
}

/// The argument model remembered requests' asks were read with, and request → its asks.
pub(crate) type OldAsks = (Option<Arc<ArgModel>>, HashMap<String, Arc<Vec<Asked>>>);

/// Remembered requests whose readings are kept; past it the kept ones are dropped.
const OLD_READINGS: usize = 4096;

/// Where a run stands while it searches: what it knows of the request ([`Context`]), how it
/// was asked to run, where the search looks, the calls it sent, its trace and its stats. A phase
/// takes the parts it reads; the phases that send calls take the whole.
pub(crate) struct RunState<'a> {
    pub(crate) ctx: Context,
    pub(crate) how: RunHow,
    pub(crate) leads: Leads,
    pub(crate) ledger: Ledger,
    pub(crate) trace: Trace<'a>,
    pub(crate) stats: RunStats,
    /// Judge and answer without the planner (memory replays, plans that passed).
    pub(crate) deterministic_judge: bool,
    /// The judgement of a memory replayed by analogy (its requirements weighed against the
    /// remembered request's).
    pub(crate) recalled_judgement: Option<crate::plan::Judgement>,
}

/// What choosing among candidates reads: the run's context, where it looks and how it runs.
pub(crate) type Here<'s> = (&'s Context, &'s Leads, &'s RunHow);

/// How a run was asked to run: set when it starts (plan mode alone falls back to the search).
pub(crate) struct RunHow {
    /// Who decides, and how candidates are found, in this run.
    pub(crate) planner: Arc<dyn Planner>,
    pub(crate) mode: Mode,
    pub(crate) backward: bool,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) dry_run: bool,
    /// Who the run is for (see [`RunOptions::caller`]).
    pub(crate) caller: Option<String>,
    pub(crate) started: Instant,
}

/// Where the search looks: the APIs retrieval found (seeds, similarities; per subtask too) and
/// the steps recalled memories made.
#[derive(Default)]
pub(crate) struct Leads {
    pub(crate) sims: HashMap<String, f64>,
    /// (from, to) steps of recalled memories' chains (START for the first) → best recall score.
    pub(crate) hints: HashMap<(String, String), f64>,
    pub(crate) seeds: Vec<String>,
    /// Seeds of each subtask (per-subtask search), and their similarities to it.
    pub(crate) subtask_seeds: Vec<Vec<String>>,
    pub(crate) subtask_sims: Vec<HashMap<String, f64>>,
    /// The request's meaning (its embedding, mentions masked): what memories are recalled by.
    pub(crate) meaning: Vec<f32>,
}

impl Leads {
    /// Similarities to what is being searched: subtask `focus`, else the request.
    pub(crate) fn sims(&self, focus: Option<usize>) -> &HashMap<String, f64> {
        match focus {
            Some(i) if i < self.subtask_sims.len() => &self.subtask_sims[i],
            _ => &self.sims,
        }
    }
}

/// The calls a run sent: how many, with which arguments, which failed and why, and what it waits
/// for from the user.
pub(crate) struct Ledger {
    pub(crate) calls_made: usize,
    pub(crate) next_label: usize,
    pub(crate) needs_input: Option<NeedsInput>,
    pub(crate) sent: HashMap<String, Map<String, Value>>,
    /// Calls that failed in this run — API id and arguments as sent — with why: never sent again.
    pub(crate) failed: HashMap<String, String>,
    /// APIs whose arguments Reverse Chain is completing now (no provider loops).
    pub(crate) inserting: Vec<String>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger {
            calls_made: 0,
            next_label: 1,
            needs_input: None,
            sent: HashMap::new(),
            failed: HashMap::new(),
            inserting: Vec::new(),
        }
    }
}

/// A run's trace: every event kept, and sent as it happens where a sink listens.
pub(crate) struct Trace<'a> {
    pub(crate) events: Vec<TraceEvent>,
    sink: Option<&'a tokio::sync::mpsc::Sender<TraceEvent>>,
}

impl Trace<'_> {
    pub(crate) async fn emit(&mut self, e: TraceEvent) {
        if let Some(s) = self.sink {
            let _ = s.send(e.clone()).await;
        }
        self.events.push(e);
    }
}

impl RunState<'_> {
    pub(crate) async fn emit(&mut self, e: TraceEvent) {
        self.trace.emit(e).await;
    }

    /// Where the search stands, as the readers of candidates take it.
    pub(crate) fn here(&self) -> Here<'_> {
        (&self.ctx, &self.leads, &self.how)
    }
}

pub(crate) enum Ended {
    Finished,
    GaveUp(String),
}

/// What an [`Engine`] is made of.
pub struct EngineParts {
    /// The tool graph, loaded once (search reads it in memory).
    pub graph: Arc<GraphSnapshot>,
    /// Where dynamic-weight updates go (`None`: never learn).
    pub store: Option<Arc<dyn GraphStore>>,
    /// Finds seed APIs.
    pub retriever: Arc<Retriever>,
    /// The long-term memory (`None`: runs recall nothing).
    pub memory: Option<Arc<Memory>>,
    /// Sends calls.
    pub executor: Executor,
    /// Decides where the rules do not.
    pub planner: Arc<dyn Planner>,
    /// Budgets and switches of a run.
    pub settings: RunSettings,
    /// The dynamic weights' α and β.
    pub weights: WeightSettings,
    /// API health shared across engines (`None`: no API is ever degraded).
    pub health: Option<Arc<super::health::Health>>,
}

impl Engine {
    /// An engine of these parts.
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
        let providers = crate::fill::providers::Providers::build(&apis, &p.graph.feeds);
        let clock = crate::clock::Clock::of(&p.settings).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the system clock is used");
            crate::clock::Clock::system()
        });
        let doc_words: HashMap<String, Vec<String>> = apis
            .values()
            .map(|a: &Arc<ApiView>| (a.id.clone(), crate::read::asks::doc_words(&a.name, &a.description)))
            .collect();
        let documented =
            crate::read::asks::documented_index(doc_words.iter().map(|(id, w)| (id.as_str(), w.as_slice())));
        // A lookup is asked for only through the call that reads it, by name too.
        let named = crate::read::named::NameIndex::build(
            apis.values().filter(|a| !a.is_lookup()).map(|a| (a.id.as_str(), a.name.as_str())),
        );
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
            documented,
            doc_words,
            named,
            clock,
            old_readings: std::sync::Mutex::new(HashMap::new()),
            old_asks: std::sync::Mutex::new((None, HashMap::new())),
        }
    }

    /// [`Self::asked_in`] of a remembered request, read once per argument model (a run weighs
    /// 8–24 memories, and the same ones again run after run).
    pub(crate) fn asked_in_old(&self, args: Option<&Arc<ArgModel>>, request: &str) -> Arc<Vec<Asked>> {
        let same = |kept: &OldAsks| match (&kept.0, args) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        {
            let kept = self.old_asks.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(v) = kept.1.get(request).filter(|_| same(&kept)) {
                return v.clone();
            }
        }
        let v = Arc::new(self.asked_in(args.map(Arc::as_ref), request));
        let mut kept = self.old_asks.lock().unwrap_or_else(|p| p.into_inner());
        if !same(&kept) || kept.1.len() >= OLD_READINGS {
            *kept = (args.cloned(), HashMap::new());
        }
        kept.1.insert(request.to_string(), v.clone());
        v
    }

    /// The typed reading of a remembered request on `today`: read once, kept (every run weighs
    /// the same few memories again; a reading takes tens of microseconds, a run weighs up to
    /// dozens).
    pub(crate) fn read_old(&self, request: &str, today: chrono::NaiveDate) -> Arc<RequestValues> {
        // Read on another day, a request reads anew ("tomorrow" moved).
        if let Some((_, v)) =
            self.old_readings.lock().unwrap_or_else(|p| p.into_inner()).get(request).filter(|(day, _)| *day == today)
        {
            return v.clone();
        }
        let v = Arc::new(RequestValues::extract(request, today));
        let mut kept = self.old_readings.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= OLD_READINGS {
            kept.clear();
        }
        kept.insert(request.to_string(), (today, v.clone()));
        v
    }

    /// The same engine over a newer graph (counts, weights and statuses learned since).
    pub fn rebuilt(&self, graph: Arc<GraphSnapshot>) -> Engine {
        let e = self.rebuilt_parts(graph);
        *e.args.write().unwrap_or_else(|p| p.into_inner()) =
            self.args.read().unwrap_or_else(|p| p.into_inner()).clone();
        // The remembered requests read so far read the same over a newer graph.
        *e.old_readings.lock().unwrap_or_else(|p| p.into_inner()) =
            self.old_readings.lock().unwrap_or_else(|p| p.into_inner()).clone();
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

    /// Whether `id` is left out of this run: degraded for all, or for its caller.
    pub(crate) fn degraded(&self, how: &RunHow, id: &str) -> bool {
        self.health.as_ref().is_some_and(|h| h.is_degraded_for(id, how.caller.as_deref()))
    }

    /// The per-user health of APIs, where kept.
    pub fn health(&self) -> Option<&Arc<super::health::Health>> {
        self.health.as_ref()
    }

    /// Its run settings.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// Its planner.
    pub fn planner(&self) -> &Arc<dyn Planner> {
        &self.planner
    }

    /// The graph the engine searches (loaded when it was built).
    pub fn graph(&self) -> &Arc<GraphSnapshot> {
        &self.graph
    }

    /// Its retriever.
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
    pub(crate) fn new_state<'a>(
        &self,
        request: &str,
        given: Map<String, Value>,
        earlier: Vec<crate::plan::Earlier>,
        sink: Option<&'a tokio::sync::mpsc::Sender<TraceEvent>>,
        opts: &RunOptions,
    ) -> RunState<'a> {
        let started = Instant::now();
        let mut ctx = Context::new(request, RequestValues::extract(request, self.clock.today()));
        ctx.given = given;
        let mut turns: Vec<(usize, &str)> = earlier.iter().map(|e| (e.turn, e.request.as_str())).collect();
        turns.dedup();
        for (turn, req) in turns {
            ctx.notes.push(format!("earlier turn {turn} of this conversation asked: {req}"));
        }
        ctx.earlier = earlier;
        RunState {
            ctx,
            how: RunHow {
                planner: opts.planner.clone().unwrap_or_else(|| self.planner.clone()),
                mode: opts.mode.unwrap_or(self.settings.mode),
                backward: opts.backward.unwrap_or(self.settings.backward),
                approver: opts.approver.clone(),
                dry_run: opts.dry_run,
                caller: opts.caller.clone(),
                started,
            },
            leads: Leads::default(),
            ledger: Ledger::default(),
            trace: Trace { events: Vec::new(), sink },
            stats: RunStats::default(),
            deterministic_judge: false,
            recalled_judgement: None,
        }
    }

    /// The APIs `request`'s words ask for (the ask model learned with `args`, see
    /// [`crate::read::asks`]); none without a model.
    pub(crate) fn asked_in(&self, args: Option<&ArgModel>, request: &str) -> Vec<Asked> {
        let Some(m) = args else { return Vec::new() };
        let about = |word: &str| self.documented.get(word).map(Vec::as_slice).unwrap_or_default();
        let mut asked: Vec<Asked> = m
            .asks
            .cues(&crate::read::asks::ask_words(request), |api, word| {
                // A lookup observed chains always go on from (a location search) is asked for
                // only through the call that reads it: no word asks for it.
                about(word).binary_search_by(|a| a.as_str().cmp(api)).is_ok()
                    && !self.apis.get(api).is_some_and(|a| a.is_lookup())
            })
            .into_iter()
            .filter_map(|c| self.apis.get(&c.api).map(|a| (c, a)))
            // A word that asks for one of several APIs is not yet a requirement: with few runs
            // learned a common word ("price") stands for APIs of other kinds, and a request
            // served without them ended `partial` (see docs/evaluation.md).
            .filter(|(c, _)| !c.open)
            .map(|(c, a)| {
                let about = about(&c.word).to_vec();
                // A word that asks for one of several APIs is named by them.
                let name = if c.open {
                    let names: Vec<&str> = about
                        .iter()
                        .filter_map(|id| self.apis.get(id))
                        .filter(|m| !m.is_lookup())
                        .map(|m| m.name.as_str())
                        .collect();
                    format!("one of {}", names.join(", "))
                } else {
                    a.name.clone()
                };
                Asked { about, api: c.api, name, word: c.word, open: c.open }
            })
            .collect();
        // An API the request says by its name, where no single word asked for it already; a
        // word said once as a word of a sibling's name asks for that one only.
        let named = self.named.asked(request, &m.asks);
        let seq = crate::read::asks::ask_word_seq(request);
        let said = crate::read::named::said_words(request);
        asked.retain(|h| {
            !crate::read::named::gives_way(&h.word, &h.api, &h.about, &named, &seq, &said, |a, b| m.reads_from(a, b))
        });
        for (api, words) in named {
            let Some(a) = self.apis.get(&api).filter(|_| !asked.iter().any(|h| h.api == api)) else { continue };
            asked.push(Asked {
                about: vec![api.clone()],
                api,
                name: a.name.clone(),
                word: words.join(" "),
                open: false,
            });
        }
        crate::read::asks::narrow_about(
            &mut asked,
            |id| self.apis.get(id).is_some_and(|a| a.is_lookup()),
            |api, id| m.reads_from(api, id),
        );
        asked
    }

    /// An ask whose API takes none of the quantities the request says ("within 20 kilometers")
    /// that exactly one other API about the same word takes (learned: a parameter of it took
    /// numbers so counted, see [`ArgModel::takes_unit`]) asks for that one: "a hotel within 20 km
    /// of the airport" is a search by coordinates (its radius), not the search by city the word
    /// "hotel" alone was learned to ask for.
    fn ask_quantity_takers(&self, ctx: &mut Context) {
        let Some(m) = ctx.args.clone() else { return };
        let mut units: Vec<String> =
            ctx.values.numbers.iter().filter_map(|c| crate::read::slots::unit_word(&c.word)).collect();
        units.sort();
        units.dedup();
        units.retain(|u| m.knows_unit(u));
        for a in ctx.asked_apis.iter_mut().filter(|a| !a.open) {
            for u in units.iter().filter(|u| !m.takes_unit(&a.api, u)) {
                let takers: Vec<&String> = a
                    .about
                    .iter()
                    .filter(|id| m.takes_unit(id, u) && self.apis.get(*id).is_some_and(|x| !x.is_lookup()))
                    .collect();
                if let ([one], Some(api)) = (takers.as_slice(), takers.first().and_then(|id| self.apis.get(*id))) {
                    a.api = (*one).clone();
                    a.name = api.name.clone();
                    break;
                }
            }
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
        let args = if self.settings.learned_arguments { self.arg_model().await? } else { None };
        // Typing slips in plain words are read as the known words they stand for; the run (its
        // report, its memory) is of the request as read.
        let (read, slips) = match args.as_deref() {
            Some(m) => crate::read::spelling::respelled(request, &m.asks.words),
            None => (request.to_string(), Vec::new()),
        };
        let request = read.as_str();
        let mut st = self.new_state(request, given, earlier, sink, &opts);
        st.ctx.args = args;
        if !slips.is_empty() {
            let words = slips.into_iter().map(|(said, read)| ReadAs { said, read }).collect();
            st.emit(TraceEvent::Respelled { words }).await;
        }
        // The APIs the request's words ask for (learned with the argument model).
        st.ctx.asked_apis = self.asked_in(st.ctx.args.as_deref(), request);
        st.ctx.context_dates = self.context_dates_of(&st.ctx, self.clock.today());
        self.ask_quantity_takers(&mut st.ctx);
        st.stats.dry_run = st.how.dry_run;
        let t = Instant::now();
        // The request's words (what retrieval reads) and its meaning, mentions masked (what the
        // long-term memory compares), embedded together.
        let mut both = self
            .retriever
            .embedder()
            .embed(vec![request.to_string(), crate::read::reading::meaning_text(request)])
            .await?
            .into_iter();
        let (vector, meaning) = (both.next().unwrap_or_default(), both.next().unwrap_or_default());
        st.stats.embed_ms += t.elapsed().as_secs_f64() * 1000.0;
        st.leads.meaning = meaning.clone();
        // Long-term memory: a close enough hit is replayed with zero planning calls.
        if self.recall(&mut st, &meaning).await? {
            return self.conclude(st, Ended::Finished, &meaning, true).await;
        }
        // After a replay that went part of the way, one search goes on from its calls (the
        // subtasks' own searches would start over around them).
        let (found, split) = self.retrieve_seeds(&mut st.ctx, &st.how, &mut st.stats, &mut st.trace, &vector).await?;
        st.leads = Leads {
            hints: std::mem::take(&mut st.leads.hints),
            meaning: std::mem::take(&mut st.leads.meaning),
            ..found
        };
        let per_subtask = split && st.ctx.path.is_empty();
        // Plan mode plans from the solution library unless a remembered plan already went part
        // of the way (the search goes on from its calls).
        if st.how.mode == Mode::Plan && st.ctx.path.is_empty() && self.run_plan(&mut st).await? {
            st.deterministic_judge = true;
            return self.conclude(st, Ended::Finished, &meaning, false).await;
        }
        let ended = self.search_and_reflect(&mut st, per_subtask).await?;
        self.conclude(st, ended, &meaning, false).await
    }
}
