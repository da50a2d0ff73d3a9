//! `toolgraph eval chains`: learn from trajectories, plan new ones. The `--train` chains
//! (ComplexFuncBench format) are ingested as trajectories into a fresh store (graph, API vectors,
//! long-term memory); every `--test` chain's request is then planned and executed against the
//! replay sandbox serving the test chains' recorded responses. Without `--test`, k-fold over
//! `--train`. Methods: `graph` (the engine), `retrieve-greedy` and `dfs-no-graph` (baselines), all
//! with the deterministic planner, in one run on the same folds.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use toolgraph_engine::adapters::embedded::EmbeddedStore;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::refs;
use toolgraph_engine::exec::{ExecSettings, Executor};
use toolgraph_engine::graph::GraphStore;
use toolgraph_engine::plan::deterministic::DeterministicPlanner;
use toolgraph_engine::retrieval::cache::EmbeddingCache;
use toolgraph_engine::retrieval::hybrid::Retriever;
use toolgraph_engine::retrieval::index::index_graph;
use toolgraph_engine::retrieval::metrics::quantile;
use toolgraph_engine::run::memory::Memory;
use toolgraph_engine::run::memory::{recorded_steps, RecordedCall};
use toolgraph_engine::run::{Mode, RunReport, RunSettings, Status};
use toolgraph_engine::stack::Stack;
use toolgraph_ingest::complexfuncbench::{
    read_chains, read_specs, run_of_chain, tool_of_host, tools_lines, Chain, Spec,
};
use toolgraph_ingest::pipeline::{self, Inputs, NoProgress};
use toolgraph_sandbox::{self as sandbox, normalize, Faults, Library, Recording, Sandbox};
use toolgraph_schema::Settings;

/// The category ComplexFuncBench APIs are filed under.
pub const CATEGORY: &str = "Travel";

/// A method compared: a search mode, target-first or not; or `llm-direct`, the model alone.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalMethod {
    pub name: String,
    pub mode: Mode,
    pub backward: bool,
    /// `llm-direct` ([`crate::direct`]): the configured LLM alone with every API in its tools,
    /// no engine (`mode` is not used).
    pub direct: bool,
}

/// The name of the model-alone baseline.
pub const LLM_DIRECT: &str = "llm-direct";

impl EvalMethod {
    pub fn of(mode: Mode) -> Self {
        EvalMethod { name: mode.name().to_string(), mode, backward: false, direct: false }
    }

    /// The model alone ([`crate::direct`]).
    pub fn llm_direct() -> Self {
        EvalMethod { name: LLM_DIRECT.into(), mode: Mode::Graph, backward: false, direct: true }
    }
}

pub struct ChainEvalOptions {
    pub train: PathBuf,
    pub test: Option<PathBuf>,
    pub spec: PathBuf,
    /// Requests reworded by hand ([`crate::reworded`]): each run in the fold where its original
    /// is held out, scored against the original's gold, reported beside the same requests as
    /// written. Never learned from.
    pub reworded: Option<PathBuf>,
    /// Only the requests that have a rewording (as written and reworded); `limit` then spreads
    /// through those.
    pub reworded_only: bool,
    /// The category the APIs are filed under ([`CATEGORY`] for ComplexFuncBench).
    pub category: String,
    pub harness: HarnessOptions,
}

/// What every benchmark harness shares: the folds, the methods compared, who decides, how many
/// held-out items, the run settings and the embedding cache.
pub struct HarnessOptions {
    pub folds: usize,
    pub methods: Vec<EvalMethod>,
    /// Who decides (the deterministic planner when `None`), e.g. a configured LLM.
    pub planner: Option<Arc<dyn toolgraph_engine::plan::Planner>>,
    /// Evaluate at most this many held-out items per fold (all when `None`).
    pub limit: Option<usize>,
    pub run: RunSettings,
    /// Embedding cache (speeds up repeated evaluations).
    pub cache: Option<PathBuf>,
}

impl HarnessOptions {
    /// The planner that decides: the configured one, else the deterministic planner.
    pub fn planner(&self) -> Arc<dyn toolgraph_engine::plan::Planner> {
        self.planner.clone().unwrap_or_else(|| Arc::new(DeterministicPlanner::default()))
    }

    /// The embedding cache, opened (none when not configured).
    pub fn open_cache(&self) -> Result<Option<EmbeddingCache>, toolgraph_ingest::IngestError> {
        Ok(match &self.cache {
            Some(p) => Some(EmbeddingCache::open(p)?),
            None => None,
        })
    }
}

/// Scores of one method.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodScores {
    pub method: String,
    pub chains: usize,
    pub call_precision: f64,
    pub call_recall: f64,
    pub call_f1: f64,
    pub edge_precision: f64,
    pub edge_recall: f64,
    pub edge_f1: f64,
    pub argument_accuracy: f64,
    pub exact_match: f64,
    pub success: f64,
    /// ComplexFuncBench's Overall Success Rate (its protocol: `complexfuncbench` module).
    #[serde(default)]
    pub overall_success_rate: f64,
    /// ComplexFuncBench's Overall Call Acc.
    #[serde(default)]
    pub overall_call_acc: f64,
    /// Gold calls some sent call matched (same API and arguments, or the same response), each
    /// gold call at most once, wherever it came in the run (API-Bank's API call correctness).
    #[serde(default)]
    pub call_correctness: f64,
    /// Runs where every gold call was matched so.
    #[serde(default)]
    pub all_calls_correct: f64,
    pub answered: usize,
    pub partial: usize,
    /// Gold successes among the runs the engine called `answered`: can `answered` be believed?
    pub answered_precision: f64,
    /// `answered` runs among the gold successes.
    pub answered_recall: f64,
    pub needs_input: usize,
    pub gave_up: usize,
    pub recalled: usize,
    pub planner_calls_mean: f64,
    pub planner_calls_p50: f64,
    /// Completions asked of an LLM per request (0 with the deterministic planner).
    #[serde(default)]
    pub llm_calls_mean: f64,
    /// Prompt tokens sent to an LLM per request.
    #[serde(default)]
    pub llm_prompt_tokens_mean: f64,
    /// Completion tokens an LLM generated per request.
    #[serde(default)]
    pub llm_completion_tokens_mean: f64,
    /// Wall seconds per request (engine, calls and LLM together).
    #[serde(default)]
    pub seconds_mean: f64,
    /// Plan mode: runs whose plan passed without falling back to the search.
    #[serde(default)]
    pub plans_completed: usize,
    pub engine_ms_p50: f64,
    pub engine_ms_p99: f64,
    pub embed_ms_p50: f64,
    /// Seed retrieval, part of engine time.
    pub retrieve_ms_p50: f64,
    pub sandbox_ms_p50: f64,
    /// API calls sent per request (every attempt the API saw, wrong ones and retries included).
    pub http_calls_mean: f64,
    /// Calls of the gold chains per request: what the calls sent are measured against.
    #[serde(default)]
    pub gold_calls_mean: f64,
}

/// One planned chain next to its gold chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChainDetail {
    pub method: String,
    pub request: String,
    pub gold: Vec<String>,
    pub planned: Vec<String>,
    pub status: String,
    pub failed_calls: u64,
    /// Score of the nearest memory, and whether it was replayed.
    pub recall: Option<(f32, bool)>,
    /// The remembered request recalled (the one replayed, or the nearest).
    #[serde(default)]
    pub recalled: Option<String>,
    /// Why a replay or the first failed call failed.
    pub first_failure: Option<String>,
    /// The benchmark's success (final gold call with the gold arguments).
    pub success: bool,
    /// What the judge found not covered.
    pub missing: String,
    /// Plan mode: where and why the plan handed over to the search (`None`: it did not, or no plan mode).
    #[serde(default)]
    pub plan_fallback: Option<String>,
    /// Plan mode: the plan's APIs.
    #[serde(default)]
    pub plan: Vec<String>,
    /// ComplexFuncBench's protocol (the `complexfuncbench` module): calls judged correct, what
    /// ended the sample or made it no success, and whether it succeeded.
    #[serde(default)]
    pub paper_correct: usize,
    #[serde(default)]
    pub paper_first_error: Option<String>,
    #[serde(default)]
    pub paper_success: bool,
    /// Planner decisions the run took.
    #[serde(default)]
    pub planner_calls: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChainReport {
    pub train_chains: usize,
    pub test_chains: usize,
    pub folds: usize,
    pub skipped: Vec<String>,
    pub methods: Vec<MethodScores>,
    pub seconds: f64,
    /// Every test chain of every method (written to the JSON report).
    pub details: Vec<ChainDetail>,
    /// Seed retrieval of the held-out requests' gold APIs: plain hybrid vs hybrid with the usage
    /// vectors the training chains built, in one run on the same folds.
    pub seed_recall: Vec<SeedRecall>,
}

/// Recall of the gold chain's APIs among the top-k seeds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeedRecall {
    pub retrieval: String,
    pub usage_weight: f32,
    pub requests: usize,
    pub recall_at_3: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
}

/// A gold call: name, arguments with references, arguments resolved.
pub struct GoldCall {
    pub name: String,
    /// Its label (`var1`), which later calls' references name.
    pub label: Option<String>,
    pub arguments: Map<String, Value>,
    pub resolved: Map<String, Value>,
    /// The recorded response (what a correct call gets).
    pub response: Option<Value>,
}

pub struct Gold {
    pub request: String,
    pub calls: Vec<GoldCall>,
}

/// A chain's request and calls, references resolved against its recorded outputs.
pub fn gold_of(chain: &Chain) -> Result<Gold, String> {
    let mut outputs: HashMap<String, Value> = HashMap::new();
    let mut calls = Vec::new();
    for (i, c) in chain.output.iter().enumerate() {
        let args = c.arguments.as_object().cloned().unwrap_or_default();
        let resolved = refs::resolve(&args, &outputs).map_err(|e| format!("output[{i}]: {e}"))?;
        if let (Some(l), Some(r)) = (&c.label, &c.response) {
            outputs.insert(l.clone(), r.clone());
        }
        calls.push(GoldCall {
            name: c.name.clone(),
            label: c.label.clone(),
            arguments: args,
            resolved,
            response: c.response.clone(),
        });
    }
    Ok(Gold { request: chain.input.trim().to_string(), calls })
}

/// The chains' recorded calls for the sandbox (references resolved against the chain's outputs).
pub fn recordings(chains: &[Chain], specs: &[Spec]) -> (Vec<Recording>, Vec<String>) {
    let by_name: HashMap<&str, &Spec> = specs.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (ci, chain) in chains.iter().enumerate() {
        let mut outputs: HashMap<String, Value> = HashMap::new();
        for (i, c) in chain.output.iter().enumerate() {
            let Some(spec) = by_name.get(c.name.as_str()) else {
                errors.push(format!("chain {ci} output[{i}]: API `{}` is not in the spec", c.name));
                continue;
            };
            let args = c.arguments.as_object().cloned().unwrap_or_default();
            match refs::resolve(&args, &outputs) {
                Ok(resolved) => {
                    if let Some(r) = &c.response {
                        out.push(Recording {
                            api: c.name.clone(),
                            route: format!("{}{}", spec.host, spec.endpoint),
                            required: spec
                                .query_parameters
                                .iter()
                                .filter(|(_, p)| p.required)
                                .map(|(n, _)| n.clone())
                                .collect(),
                            arguments: resolved,
                            response: r.clone(),
                        });
                    }
                }
                Err(e) => errors.push(format!("chain {ci} output[{i}]: {e}")),
            }
            if let (Some(l), Some(r)) = (&c.label, &c.response) {
                outputs.insert(l.clone(), r.clone());
            }
        }
    }
    (out, errors)
}

/// Labels an argument value references (`$var1.x$` → `var1`).
pub(crate) fn labels_in(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => {
            refs::references(s).into_iter().map(|r| r.split('.').next().unwrap_or_default().to_string()).collect()
        }
        Value::Array(a) => a.iter().flat_map(labels_in).collect(),
        Value::Object(m) => m.values().flat_map(labels_in).collect(),
        _ => Vec::new(),
    }
}

/// Data-flow edges (producer name → consumer name) of a chain given as (label, name, args).
fn flow_edges(calls: &[(String, String, &Map<String, Value>)]) -> Vec<(String, String)> {
    let names: HashMap<&str, &str> = calls.iter().map(|(l, n, _)| (l.as_str(), n.as_str())).collect();
    let mut out = Vec::new();
    for (_, name, args) in calls {
        let mut labels: Vec<String> = args.values().flat_map(labels_in).collect();
        labels.sort();
        labels.dedup();
        for l in labels {
            if let Some(p) = names.get(l.as_str()) {
                out.push((p.to_string(), name.clone()));
            }
        }
    }
    out
}

/// |a ∩ b| as multisets.
fn overlap<T: Ord + Clone>(a: &[T], b: &[T]) -> usize {
    let mut counts: BTreeMap<T, i64> = BTreeMap::new();
    for x in a {
        *counts.entry(x.clone()).or_default() += 1;
    }
    let mut n = 0;
    for x in b {
        if let Some(c) = counts.get_mut(x) {
            if *c > 0 {
                *c -= 1;
                n += 1;
            }
        }
    }
    n
}

fn args_equal(gold: &Map<String, Value>, sent: &Map<String, Value>) -> (usize, usize) {
    let same = gold.iter().filter(|(k, v)| sent.get(*k).is_some_and(|s| normalize(s) == normalize(v))).count();
    (same, gold.len())
}

#[derive(Default)]
struct Tally {
    chains: usize,
    pred_calls: usize,
    gold_calls: usize,
    call_hits: usize,
    pred_edges: usize,
    gold_edges: usize,
    edge_hits: usize,
    args_same: usize,
    args_total: usize,
    exact: usize,
    success: usize,
    /// ComplexFuncBench's protocol: golden calls, correct calls (up to the first error), successes.
    cfb_golden: usize,
    cfb_correct: usize,
    cfb_success: usize,
    correct_calls: usize,
    all_correct: usize,
    answered: usize,
    partial: usize,
    answered_success: usize,
    needs_input: usize,
    gave_up: usize,
    recalled: usize,
    plans_completed: usize,
    llm_calls: Vec<f64>,
    llm_prompt_tokens: Vec<f64>,
    llm_completion_tokens: Vec<f64>,
    seconds: Vec<f64>,
    planner_calls: Vec<f64>,
    engine_ms: Vec<f64>,
    embed_ms: Vec<f64>,
    retrieve_ms: Vec<f64>,
    sandbox_ms: Vec<f64>,
    http_calls: Vec<f64>,
}

impl Tally {
    fn add(&mut self, protocol: &crate::complexfuncbench::Protocol, gold: &Gold, run: &RunReport) {
        self.chains += 1;
        let pred_names: Vec<String> = run.chain.iter().map(|c| c.name.clone()).collect();
        let gold_names: Vec<String> = gold.calls.iter().map(|c| c.name.clone()).collect();
        self.pred_calls += pred_names.len();
        self.gold_calls += gold_names.len();
        self.call_hits += overlap(&gold_names, &pred_names);
        let gold_flow: Vec<(String, String, &Map<String, Value>)> = gold
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("var{}", i + 1), c.name.clone(), &c.arguments))
            .collect();
        let pred_flow: Vec<(String, String, &Map<String, Value>)> =
            run.chain.iter().map(|c| (c.label.clone(), c.name.clone(), &c.arguments)).collect();
        let ge = flow_edges(&gold_flow);
        let pe = flow_edges(&pred_flow);
        self.gold_edges += ge.len();
        self.pred_edges += pe.len();
        self.edge_hits += overlap(&ge, &pe);
        // Align by name in order; compare resolved gold arguments with those sent.
        let mut used = vec![false; run.chain.len()];
        let mut all_same = run.chain.len() == gold.calls.len();
        for (gi, g) in gold.calls.iter().enumerate() {
            let m = run.chain.iter().enumerate().find(|(i, c)| !used[*i] && c.name == g.name).map(|(i, _)| i);
            let (same, total) = match m {
                Some(i) => {
                    used[i] = true;
                    if i != gi {
                        all_same = false;
                    }
                    args_equal(&g.resolved, &run.chain[i].sent)
                }
                None => (0, g.resolved.len()),
            };
            if same != total || m.is_none() {
                all_same = false;
            }
            self.args_same += same;
            self.args_total += total;
        }
        if all_same {
            self.exact += 1;
        }
        let success = succeeded(gold, run);
        if success {
            self.success += 1;
        }
        // The paper's figures by its own protocol: the engine's `answered` is not part of them.
        let sent = crate::complexfuncbench::sent_calls(&run.trace);
        let paper = crate::complexfuncbench::score(protocol, gold, &sent);
        self.cfb_golden += paper.golden;
        self.cfb_correct += paper.correct;
        self.cfb_success += usize::from(paper.success);
        let correct = crate::complexfuncbench::correct_calls(protocol, gold, &sent);
        self.correct_calls += correct;
        self.all_correct += usize::from(correct == gold.calls.len() && !gold.calls.is_empty());
        match run.status {
            Status::Answered => {
                self.answered += 1;
                if success {
                    self.answered_success += 1;
                }
            }
            Status::Partial => self.partial += 1,
            Status::NeedsInput => self.needs_input += 1,
            Status::GaveUp => self.gave_up += 1,
        }
        if run.stats.recalled {
            self.recalled += 1;
        }
        self.planner_calls.push(run.stats.planner_calls as f64);
        self.llm_calls.push(run.stats.llm.values().map(|u| u.calls as f64).sum::<f64>() + 0.0);
        self.llm_prompt_tokens.push(run.stats.llm.values().map(|u| u.prompt_tokens as f64).sum::<f64>());
        self.llm_completion_tokens.push(run.stats.llm.values().map(|u| u.completion_tokens as f64).sum::<f64>());
        if run.stats.planned && run.stats.plan_fallback_at.is_none() {
            self.plans_completed += 1;
        }
        self.engine_ms.push(run.stats.engine_ms);
        self.embed_ms.push(run.stats.embed_ms);
        self.retrieve_ms.push(run.stats.retrieve_ms);
        self.sandbox_ms.push(run.stats.http_ms);
        self.http_calls.push(run.stats.http_calls as f64);
    }

    fn scores(&mut self, method: &str) -> MethodScores {
        let div = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let f1 = |p: f64, r: f64| if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) };
        let (cp, cr) = (div(self.call_hits, self.pred_calls), div(self.call_hits, self.gold_calls));
        let (ep, er) = (div(self.edge_hits, self.pred_edges), div(self.edge_hits, self.gold_edges));
        for v in [
            &mut self.planner_calls,
            &mut self.engine_ms,
            &mut self.embed_ms,
            &mut self.retrieve_ms,
            &mut self.sandbox_ms,
        ] {
            v.sort_by(f64::total_cmp);
        }
        let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        MethodScores {
            method: method.to_string(),
            chains: self.chains,
            call_precision: cp,
            call_recall: cr,
            call_f1: f1(cp, cr),
            edge_precision: ep,
            edge_recall: er,
            edge_f1: f1(ep, er),
            argument_accuracy: div(self.args_same, self.args_total),
            exact_match: div(self.exact, self.chains),
            success: div(self.success, self.chains),
            overall_success_rate: div(self.cfb_success, self.chains),
            overall_call_acc: div(self.cfb_correct, self.cfb_golden),
            call_correctness: div(self.correct_calls, self.gold_calls),
            all_calls_correct: div(self.all_correct, self.chains),
            answered: self.answered,
            partial: self.partial,
            answered_precision: div(self.answered_success, self.answered),
            answered_recall: div(self.answered_success, self.success),
            needs_input: self.needs_input,
            gave_up: self.gave_up,
            recalled: self.recalled,
            planner_calls_mean: mean(&self.planner_calls),
            planner_calls_p50: quantile(&self.planner_calls, 0.5),
            llm_calls_mean: mean(&self.llm_calls),
            llm_prompt_tokens_mean: mean(&self.llm_prompt_tokens),
            llm_completion_tokens_mean: mean(&self.llm_completion_tokens),
            seconds_mean: mean(&self.seconds),
            plans_completed: self.plans_completed,
            engine_ms_p50: quantile(&self.engine_ms, 0.5),
            engine_ms_p99: quantile(&self.engine_ms, 0.99),
            embed_ms_p50: quantile(&self.embed_ms, 0.5),
            retrieve_ms_p50: quantile(&self.retrieve_ms, 0.5),
            sandbox_ms_p50: quantile(&self.sandbox_ms, 0.5),
            http_calls_mean: mean(&self.http_calls),
            gold_calls_mean: div(self.gold_calls, self.chains),
        }
    }
}

/// One fold: the chains learned from, and the held-out chains with their index in their file.
type Fold<'a> = (Vec<&'a Chain>, Vec<(usize, &'a Chain)>);

/// At most `limit` of `items`, evenly spaced through them (all when `None` or not fewer): a fixed
/// subset that samples the whole fold rather than its first, often alike, items.
pub fn spread<T: Copy>(items: &[T], limit: Option<usize>) -> Vec<T> {
    match limit {
        Some(l) if l < items.len() => (0..l).map(|i| items[i * items.len() / l]).collect(),
        _ => items.to_vec(),
    }
}

/// The benchmark's success: the final gold call made with the gold arguments.
pub fn succeeded(gold: &Gold, run: &RunReport) -> bool {
    gold.calls.last().is_some_and(|last| {
        run.chain.iter().any(|c| {
            c.name == last.name && {
                let (s, t) = args_equal(&last.resolved, &c.sent);
                s == t
            }
        })
    })
}

/// What [`learn`] built.
pub struct Learned {
    pub store: Arc<dyn GraphStore>,
    pub vectors: Arc<dyn toolgraph_engine::vector::VectorStore>,
    pub retriever: Arc<Retriever>,
    pub memory: Arc<Memory>,
    pub embedder: Arc<dyn Embedder>,
}

impl Learned {
    /// The fold's stack: these stores, calls sent through `executor`, `planner` deciding.
    pub fn stack(
        &self,
        settings: &Settings,
        executor: Executor,
        planner: Arc<dyn toolgraph_engine::plan::Planner>,
    ) -> Stack {
        Stack {
            settings: settings.clone(),
            store: self.store.clone(),
            vectors: self.vectors.clone(),
            embedder: self.embedder.clone(),
            cache: None,
            memory: self.memory.clone(),
            executor,
            planner,
            models: None,
        }
    }
}

/// Learn from `train` into fresh stores under `dir`: graph (ingest), API vectors, memories.
pub async fn learn(
    dir: &Path,
    train: &[&Chain],
    specs: &[Spec],
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    cache: Option<&EmbeddingCache>,
) -> Result<Learned, toolgraph_ingest::IngestError> {
    learn_in(dir, train, specs, CATEGORY, settings, embedder, cache).await
}

/// [`learn`] with the APIs filed under `category`.
pub async fn learn_in(
    dir: &Path,
    train: &[&Chain],
    specs: &[Spec],
    category: &str,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    cache: Option<&EmbeddingCache>,
) -> Result<Learned, toolgraph_ingest::IngestError> {
    let io = |e: std::io::Error| toolgraph_ingest::IngestError::Input(format!("writing under {}: {e}", dir.display()));
    let tools_path = dir.join("tools.jsonl");
    let runs_path = dir.join("runs.jsonl");
    let mut tw = std::io::BufWriter::new(std::fs::File::create(&tools_path).map_err(io)?);
    for line in tools_lines(specs, category) {
        writeln!(tw, "{line}").map_err(io)?;
    }
    tw.flush().map_err(io)?;
    let tools: BTreeMap<String, String> = specs.iter().map(|s| (s.name.clone(), tool_of_host(&s.host))).collect();
    let mut rw = std::io::BufWriter::new(std::fs::File::create(&runs_path).map_err(io)?);
    for (i, c) in train.iter().enumerate() {
        if let Ok(run) = run_of_chain(i, c, &tools, category) {
            writeln!(rw, "{}", serde_json::to_string(&run).unwrap_or_default()).map_err(io)?;
        }
    }
    rw.flush().map_err(io)?;
    drop(rw);
    let store: Arc<dyn GraphStore> = Arc::new(EmbeddedStore::open(&dir.join("graph.redb"))?);
    store.setup().await?;
    let learner = toolgraph_ingest::pipeline::Learner(Arc::new(
        toolgraph_engine::run::args::ArgTrainer::open(store.as_ref()).await?,
    ));
    let inputs =
        Inputs { tools: vec![tools_path], trajectories: vec![runs_path], learner: Some(learner), ..Inputs::default() };
    pipeline::ingest(store.clone(), inputs, settings, Arc::new(NoProgress)).await?;
    let vectors = toolgraph_engine::store::open_vectors(&toolgraph_schema::VectorSettings {
        uri: format!("embedded:{}", dir.join("vectors").display()),
        ..settings.vectors.clone()
    })?;
    index_graph(
        store.as_ref(),
        vectors.as_ref(),
        embedder.as_ref(),
        cache,
        settings.retrieval.index_chunk,
        false,
        |_, _| {},
    )
    .await?;
    let retriever =
        Arc::new(Retriever::load(vectors.clone(), embedder.clone(), None, settings.retrieval.clone()).await?);
    let memory = Arc::new(Memory::open(vectors.clone(), embedder.dim()).await?);
    // Long-term memory: every training request with its chain (arguments that reference an
    // earlier output keep the reference; the rest are re-filled when replayed).
    let snapshot = store.node_snapshot().await?;
    let id_of: HashMap<&str, &str> = snapshot.apis.values().map(|a| (a.name.as_str(), a.id.as_str())).collect();
    let requests: Vec<String> = train.iter().map(|c| c.input.trim().to_string()).collect();
    let vecs = embedder.embed(requests.clone()).await?;
    // The memory compares requests by meaning (mentions masked), as the engine does.
    let meanings =
        embedder.embed(requests.iter().map(|r| toolgraph_engine::plan::reading::meaning_text(r)).collect()).await?;
    for ((c, (req, v)), meaning) in train.iter().zip(requests.iter().zip(vecs)).zip(meanings) {
        // Usage vectors: the request joins every API of its chain.
        let used: Vec<String> =
            c.output.iter().filter_map(|call| id_of.get(call.name.as_str()).map(|s| s.to_string())).collect();
        retriever.add_usage(&used, &v).await?;
        // Literals the request never says but an earlier response holds become references.
        let labels: Vec<String> = (1..=c.output.len()).map(|i| format!("var{i}")).collect();
        let empty = Map::new();
        let calls: Vec<RecordedCall<'_>> = c
            .output
            .iter()
            .zip(&labels)
            .filter_map(|(call, label)| {
                let api = id_of.get(call.name.as_str())?;
                Some(RecordedCall {
                    api,
                    label: call.label.as_deref().unwrap_or(label),
                    arguments: call.arguments.as_object().unwrap_or(&empty),
                    response: call.response.as_ref(),
                })
            })
            .collect();
        let steps = recorded_steps(req, &calls);
        memory.remember(req, meaning, steps).await?;
    }
    Ok(Learned { store, vectors, retriever, memory, embedder })
}

/// Run the evaluation; `progress(done, total)` after each test chain of each method.
pub async fn run(
    opts: &ChainEvalOptions,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    mut progress: impl FnMut(usize, usize),
) -> Result<ChainReport, toolgraph_ingest::IngestError> {
    let started = Instant::now();
    let max = 1 << 30;
    let specs = read_specs(&opts.spec, max).map_err(|e| toolgraph_ingest::IngestError::Input(e.to_string()))?;
    let train_all = read_chains(&opts.train, max).map_err(|e| toolgraph_ingest::IngestError::Input(e.to_string()))?;
    let test_all = match &opts.test {
        Some(t) => Some(read_chains(t, max).map_err(|e| toolgraph_ingest::IngestError::Input(e.to_string()))?),
        None => None,
    };
    let cache = opts.harness.open_cache()?;
    // Folds: (train, test) index sets over the chains.
    // Folds: the training chains, and the test chains with their index in the file they come
    // from (what a reworded request names).
    let folds: Vec<Fold<'_>> = match &test_all {
        Some(test) => vec![(train_all.iter().collect(), test.iter().enumerate().collect())],
        None => {
            let k = opts.harness.folds.max(2);
            (0..k)
                .map(|f| {
                    (
                        train_all.iter().enumerate().filter(|(i, _)| i % k != f).map(|(_, c)| c).collect(),
                        train_all.iter().enumerate().filter(|(i, _)| i % k == f).collect(),
                    )
                })
                .collect()
        }
    };
    // Requests reworded by hand, by the index of the chain they reword (never learned from).
    let (reworded, reworded_skipped) = match &opts.reworded {
        Some(path) => crate::reworded::read(path, test_all.as_deref().unwrap_or(&train_all))?,
        None => (HashMap::new(), Vec::new()),
    };
    let mut report = ChainReport {
        train_chains: train_all.len(),
        test_chains: test_all.as_ref().map(Vec::len).unwrap_or(train_all.len()),
        folds: folds.len(),
        ..Default::default()
    };
    report.skipped.extend(reworded_skipped);
    let mut tallies: Vec<Tally> = opts.harness.methods.iter().map(|_| Tally::default()).collect();
    // The requests that have a rewording: as written, and reworded (same gold), per method.
    let mut as_written: Vec<Tally> = opts.harness.methods.iter().map(|_| Tally::default()).collect();
    let mut rewordings: Vec<Tally> = opts.harness.methods.iter().map(|_| Tally::default()).collect();
    let held_out = |t: &[(usize, &Chain)]| {
        if opts.reworded_only {
            t.iter().filter(|(i, _)| reworded.contains_key(i)).count()
        } else {
            t.len()
        }
    };
    let total: usize =
        folds.iter().map(|(_, t)| opts.harness.limit.map_or(held_out(t), |l| l.min(held_out(t)))).sum::<usize>()
            * opts.harness.methods.len();
    let mut done = 0;
    // (label, usage weight, requests, recall sums @3/@5/@10)
    let mut seed_tallies: Vec<(String, f32, usize, [f64; 3])> = Vec::new();
    for (fi, (train, test)) in folds.iter().enumerate() {
        let dir = tempfile::Builder::new()
            .prefix(&format!("toolgraph-eval-fold{fi}-"))
            .tempdir()
            .map_err(|e| toolgraph_ingest::IngestError::Input(format!("cannot create a temporary folder: {e}")))?;
        let learned =
            learn_in(dir.path(), train, &specs, &opts.category, settings, embedder.clone(), cache.as_ref()).await?;
        let retriever = learned.retriever.clone();
        let snapshot = Arc::new(learned.store.snapshot().await?);
        let rewordable: Vec<(usize, &Chain)>;
        let test: &[(usize, &Chain)] = if opts.reworded_only {
            rewordable = test.iter().filter(|(i, _)| reworded.contains_key(i)).copied().collect();
            &rewordable
        } else {
            test
        };
        let indexed: Vec<(usize, &Chain)> = spread(test, opts.harness.limit);
        let test: Vec<&Chain> = indexed.iter().map(|(_, c)| *c).collect();
        // Seed recall, plain hybrid against hybrid with usage vectors.
        {
            let id_of: HashMap<&str, &str> = snapshot.apis.values().map(|a| (a.name.as_str(), a.id.as_str())).collect();
            let requests: Vec<String> = test.iter().map(|c| c.input.trim().to_string()).collect();
            let vecs = embedder.embed(requests.clone()).await?;
            let usage_weight =
                if settings.retrieval.usage_weight > 0.0 { settings.retrieval.usage_weight } else { 0.3 };
            for (wi, (label, w)) in
                [("hybrid", 0.0f32), ("hybrid + usage vectors", usage_weight)].into_iter().enumerate()
            {
                while seed_tallies.len() <= wi {
                    seed_tallies.push((String::new(), 0.0, 0, [0.0f64; 3]));
                }
                let t = &mut seed_tallies[wi];
                t.0 = label.to_string();
                t.1 = w;
                for ((c, req), v) in test.iter().zip(&requests).zip(&vecs) {
                    let mut gold: Vec<&str> =
                        c.output.iter().filter_map(|call| id_of.get(call.name.as_str()).copied()).collect();
                    gold.sort_unstable();
                    gold.dedup();
                    if gold.is_empty() {
                        continue;
                    }
                    let hits = retriever
                        .search_with_usage(
                            req,
                            v,
                            10,
                            &Default::default(),
                            toolgraph_engine::retrieval::hybrid::Method::Hybrid,
                            None,
                            w,
                        )
                        .await?;
                    for (ki, k) in [3usize, 5, 10].into_iter().enumerate() {
                        let found = gold.iter().filter(|g| hits.iter().take(k).any(|h| h.id == **g)).count();
                        t.3[ki] += found as f64 / gold.len() as f64;
                    }
                    t.2 += 1;
                }
            }
        }
        let owned: Vec<Chain> = test.iter().map(|c| (*c).clone()).collect();
        let (recs, errors) = recordings(&owned, &specs);
        report.skipped.extend(errors);
        // Scored against what the sandbox recorded for exactly a call's arguments (its nearest
        // answers never make a call right).
        let protocol = crate::complexfuncbench::Protocol::new(&specs, &recs);
        let sb = Sandbox::new(Library::new(recs), Faults::default());
        let (addr, stop) = sandbox::spawn("127.0.0.1:0", sb)
            .await
            .map_err(|e| toolgraph_ingest::IngestError::Input(format!("cannot start the replay sandbox: {e}")))?;
        let exec = Executor::new(ExecSettings {
            rewrites: vec![("https://".into(), format!("http://{addr}/"))],
            timeout_ms: 5_000,
            retries: 1,
            backoff_ms: 20,
            allow_private: vec!["127.0.0.1/32".into()],
            ..ExecSettings::default()
        })?;
        let stack = learned.stack(settings, exec.clone(), opts.harness.planner());
        // llm-direct: every API of the domain as the model's tools, in a stable order.
        let mut apis: Vec<&toolgraph_schema::ApiNode> =
            snapshot.apis.values().filter(|a| a.category.eq_ignore_ascii_case(&opts.category)).collect();
        apis.sort_by(|a, b| a.name.cmp(&b.name));
        let direct_opts = crate::direct::DirectOptions::default();
        let tools = crate::direct::tool_entries(&apis, &direct_opts);
        let by_name: HashMap<String, &toolgraph_schema::ApiNode> = apis.iter().map(|a| (a.name.clone(), *a)).collect();
        let planner = opts.harness.planner();
        for (mi, method) in opts.harness.methods.iter().enumerate() {
            // The model alone (llm-direct), or the engine in the method's mode.
            let llm = if method.direct {
                Some(planner.as_llm().ok_or_else(|| {
                    toolgraph_ingest::IngestError::Input(format!("{LLM_DIRECT} needs an LLM: --planner llm"))
                })?)
            } else {
                None
            };
            let mode = &method.mode;
            let run_settings = RunSettings {
                mode: *mode,
                backward: method.backward,
                use_memory: matches!(*mode, Mode::Graph | Mode::Plan) && opts.harness.run.use_memory,
                remember: false,
                learn: false,
                ..opts.harness.run.clone()
            };
            let engine = stack.engine_over(snapshot.clone(), retriever.clone(), run_settings, None);
            for (index, chain) in &indexed {
                let gold = match gold_of(chain) {
                    Ok(g) => g,
                    Err(e) => {
                        report.skipped.push(format!("test chain: {e}"));
                        continue;
                    }
                };
                let started = Instant::now();
                let r = match llm {
                    Some(llm) => {
                        crate::direct::run_direct(llm, &by_name, &tools, &exec, &gold.request, &direct_opts).await?
                    }
                    None => engine.run(&gold.request, Map::new(), None).await?,
                };
                let seconds = started.elapsed().as_secs_f64();
                tallies[mi].seconds.push(seconds);
                tallies[mi].add(&protocol, &gold, &r);
                report.details.push(detail(&protocol, &method.name, &gold, &r));
                done += 1;
                progress(done, total);
                // The same request reworded: run in the fold where its original is held out,
                // scored against the same gold, beside the as-written run.
                if let Some(words) = reworded.get(index) {
                    as_written[mi].add(&protocol, &gold, &r);
                    as_written[mi].seconds.push(seconds);
                    let gold = Gold { request: words.clone(), ..gold };
                    let started = Instant::now();
                    let r = match llm {
                        Some(llm) => {
                            crate::direct::run_direct(llm, &by_name, &tools, &exec, &gold.request, &direct_opts).await?
                        }
                        None => engine.run(&gold.request, Map::new(), None).await?,
                    };
                    rewordings[mi].seconds.push(started.elapsed().as_secs_f64());
                    rewordings[mi].add(&protocol, &gold, &r);
                    report.details.push(detail(&protocol, &reworded_name(&method.name), &gold, &r));
                }
            }
        }
        let _ = stop.send(());
    }
    report.seed_recall = seed_tallies
        .into_iter()
        .map(|(retrieval, usage_weight, n, s)| {
            let d = n.max(1) as f64;
            SeedRecall {
                retrieval,
                usage_weight,
                requests: n,
                recall_at_3: s[0] / d,
                recall_at_5: s[1] / d,
                recall_at_10: s[2] / d,
            }
        })
        .collect();
    report.methods = opts.harness.methods.iter().zip(tallies.iter_mut()).map(|(m, t)| t.scores(&m.name)).collect();
    if !reworded.is_empty() {
        for (i, m) in opts.harness.methods.iter().enumerate() {
            report.methods.push(as_written[i].scores(&format!("{} · as written", m.name)));
            report.methods.push(rewordings[i].scores(&reworded_name(&m.name)));
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn detail(protocol: &crate::complexfuncbench::Protocol, method: &str, gold: &Gold, r: &RunReport) -> ChainDetail {
    use toolgraph_engine::run::trace::TraceEvent;
    let recall = r.trace.iter().find_map(|t| match t {
        TraceEvent::Recall { score, replayed, .. } => Some((*score, *replayed)),
        _ => None,
    });
    let recalled = r.trace.iter().find_map(|t| match t {
        TraceEvent::Recall { request, .. } => Some(request.chars().take(300).collect()),
        _ => None,
    });
    let first_failure = r.trace.iter().find_map(|t| match t {
        TraceEvent::RecallFailed { reason } => Some(format!("replay: {reason}")),
        TraceEvent::CallFailed { api, error, .. } => Some(format!("{api}: {error}")),
        TraceEvent::NeedsInput { api, missing } => Some(format!("{api} needs {}", missing.join(", "))),
        _ => None,
    });
    let paper = crate::complexfuncbench::score(protocol, gold, &crate::complexfuncbench::sent_calls(&r.trace));
    ChainDetail {
        paper_correct: paper.correct,
        paper_first_error: paper.first_error,
        paper_success: paper.success,
        planner_calls: r.stats.planner_calls,
        method: method.to_string(),
        request: gold.request.chars().take(300).collect(),
        gold: gold.calls.iter().map(|c| c.name.clone()).collect(),
        planned: r.chain.iter().map(|c| c.name.clone()).collect(),
        status: r.status.as_str().to_string(),
        failed_calls: r.stats.failed_calls,
        recall,
        recalled,
        first_failure,
        success: succeeded(gold, r),
        missing: r
            .judgement
            .as_ref()
            .map(|j| toolgraph_engine::plan::coverage::missing_text(&j.coverage))
            .unwrap_or_default(),
        // The run's plan is the last one it made (a remembered plan may have failed before it).
        plan: r
            .trace
            .iter()
            .rev()
            .find_map(|t| match t {
                TraceEvent::Plan { steps, .. } => {
                    Some(steps.iter().map(|s| s.rsplit('/').next().unwrap_or(s).to_string()).collect())
                }
                _ => None,
            })
            .unwrap_or_default(),
        plan_fallback: r
            .trace
            .iter()
            .skip(r.trace.iter().rposition(|t| matches!(t, TraceEvent::Plan { .. })).unwrap_or(0))
            .find_map(|t| match t {
                TraceEvent::PlanFailed { step, reason } => Some(format!("step {step}: {reason}")),
                _ => None,
            }),
    }
}

/// The name of a method's rows on the reworded requests.
pub fn reworded_name(method: &str) -> String {
    format!("{method} · reworded")
}

/// The report as a markdown table.
pub fn markdown(r: &ChainReport) -> String {
    let mut s = format!(
        "# Chain planning: {} train / {} test chains, {} fold(s)\n\n| method | call P | call R | call F1 | edge F1 | arg acc | exact | success | answered | partial | gave up | needs input | answered P | answered R | recalled | planner calls (mean) | LLM calls (mean) | plans completed | engine ms p50 | engine ms p99 | of which retrieval p50 | embed ms p50 | sandbox ms p50 | API calls sent | gold calls |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        r.train_chains, r.test_chains, r.folds
    );
    for m in &r.methods {
        s.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {:.1} | {:.1} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            m.method, m.call_precision, m.call_recall, m.call_f1, m.edge_f1, m.argument_accuracy, m.exact_match, m.success, m.answered, m.partial, m.gave_up, m.needs_input, m.answered_precision, m.answered_recall, m.recalled, m.planner_calls_mean, m.llm_calls_mean, m.plans_completed, m.engine_ms_p50, m.engine_ms_p99, m.retrieve_ms_p50, m.embed_ms_p50, m.sandbox_ms_p50, m.http_calls_mean, m.gold_calls_mean
        ));
    }
    s.push_str(&crate::complexfuncbench::table(r));
    if r.methods.iter().any(|m| m.llm_calls_mean > 0.0) {
        s.push_str("\nLLM cost per request (ComplexFuncBench's protocol):\n\n| method | Overall Success | Overall Call Acc. | LLM calls | prompt tokens | completion tokens | seconds |\n|---|---:|---:|---:|---:|---:|---:|\n");
        for m in &r.methods {
            s.push_str(&format!(
                "| {} | {:.2} | {:.2} | {:.1} | {:.0} | {:.0} | {:.1} |\n",
                m.method,
                100.0 * m.overall_success_rate,
                100.0 * m.overall_call_acc,
                m.llm_calls_mean,
                m.llm_prompt_tokens_mean,
                m.llm_completion_tokens_mean,
                m.seconds_mean
            ));
        }
    }
    if !r.seed_recall.is_empty() {
        s.push_str("\nSeed retrieval of the gold chains' APIs (held-out requests):\n\n| retrieval | usage weight | requests | recall@3 | recall@5 | recall@10 |\n|---|---:|---:|---:|---:|---:|\n");
        for x in &r.seed_recall {
            s.push_str(&format!(
                "| {} | {:.2} | {} | {:.3} | {:.3} | {:.3} |\n",
                x.retrieval, x.usage_weight, x.requests, x.recall_at_3, x.recall_at_5, x.recall_at_10
            ));
        }
    }
    s.push_str(&crate::report::skipped_md("record", &r.skipped));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_limit_spreads_through_the_fold() {
        let items: Vec<usize> = (0..10).collect();
        assert_eq!(spread(&items, Some(3)), vec![0, 3, 6]);
        assert_eq!(spread(&items, Some(10)), items);
        assert_eq!(spread(&items, None), items);
        assert_eq!(spread(&items[..0], Some(2)), Vec::<usize>::new());
    }

    #[test]
    fn flow_edges_and_overlap() {
        let a = json!({"q": "x"}).as_object().unwrap().clone();
        let b = json!({"lat": "$var1.coordinates.latitude$", "lon": "$var1.coordinates.longitude$"})
            .as_object()
            .unwrap()
            .clone();
        let calls = vec![("var1".to_string(), "Loc".to_string(), &a), ("var2".to_string(), "Rent".to_string(), &b)];
        assert_eq!(flow_edges(&calls), vec![("Loc".to_string(), "Rent".to_string())]);
        assert_eq!(overlap(&["a", "a", "b"], &["a", "b", "b"]), 2);
        let (s, t) = args_equal(
            json!({"d": "2024-10-14", "n": 2}).as_object().unwrap(),
            json!({"d": "2024-10-14", "n": "2", "x": 1}).as_object().unwrap(),
        );
        assert_eq!((s, t), (2, 2));
    }
}
