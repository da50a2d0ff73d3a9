//! `toolgraph eval chains`: learn from trajectories, plan new ones. The `--train` chains
//! (ComplexFuncBench format) are ingested as trajectories into a fresh store (graph, API vectors,
//! long-term memory); every `--test` chain's request is then planned and executed against the
//! replay sandbox serving the test chains' recorded responses. Without `--test`, k-fold over
//! `--train`. Methods: `graph` (the engine), `retrieve-greedy` and `dfs-no-graph` (baselines), all
//! with the deterministic planner, in one run on the same folds.

mod learn;
mod report;
mod scores;
mod split;
mod tally;

pub use crate::gold::{gold_of, recordings, succeeded, Gold, GoldCall};
pub use learn::{learn, learn_in, Learned, CATEGORY};
use report::detail;
pub use report::{markdown, paper_table, reworded_name};
pub use scores::{ChainDetail, ChainReport, MethodScores, SeedRecall};
use split::Fold;
pub use split::Split;
use tally::Tally;

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::{ExecSettings, Executor};
use toolgraph_engine::plan::DeterministicPlanner;
use toolgraph_engine::retrieval::cache::EmbeddingCache;
use toolgraph_engine::retrieval::hybrid::Retriever;
use toolgraph_engine::run::{Mode, RunSettings};
use toolgraph_ingest::complexfuncbench::{read_chains, read_specs, Chain, Spec};
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_schema::Settings;

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
    /// How the held-out chains of a fold are drawn ([`Split`]; chain files only).
    pub split: Split,
    pub methods: Vec<EvalMethod>,
    /// Who decides (the deterministic planner when `None`), e.g. a configured LLM.
    pub planner: Option<Arc<dyn toolgraph_engine::plan::Planner>>,
    /// The same model as the OpenAI-compatible endpoint it is, when the planner is an LLM: what
    /// `llm-direct` asks directly.
    pub llm: Option<Arc<toolgraph_engine::plan::llm::LlmPlanner>>,
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
    pub fn open_cache(&self) -> Result<Option<Arc<EmbeddingCache>>, toolgraph_ingest::IngestError> {
        Ok(match &self.cache {
            Some(p) => Some(Arc::new(EmbeddingCache::open(p)?)),
            None => None,
        })
    }
}

/// At most `limit` of `items`, evenly spaced through them (all when `None` or not fewer): a fixed
/// subset that samples the whole fold rather than its first, often alike, items.
pub fn spread<T: Copy>(items: &[T], limit: Option<usize>) -> Vec<T> {
    match limit {
        Some(l) if l < items.len() => (0..l).map(|i| items[i * items.len() / l]).collect(),
        _ => items.to_vec(),
    }
}

type Failed = toolgraph_ingest::IngestError;

fn input(e: impl std::fmt::Display) -> Failed {
    toolgraph_ingest::IngestError::Input(e.to_string())
}

/// The folds: `--test` as one fold over all of `--train`, else `k` folds over `--train` by
/// `split`; with the held-out chains skipped (families: one calling an API its fold never learned).
fn folds_of<'a>(train: &'a [Chain], test: Option<&'a [Chain]>, k: usize, split: Split) -> (Vec<Fold<'a>>, Vec<String>) {
    match (test, split) {
        (Some(test), _) => (vec![(train.iter().collect(), test.iter().enumerate().collect())], Vec::new()),
        (None, Split::Families) => split::family_folds(train, k),
        (None, Split::Chains) => {
            let k = k.max(2);
            let folds = (0..k)
                .map(|f| {
                    (
                        train.iter().enumerate().filter(|(i, _)| i % k != f).map(|(_, c)| c).collect(),
                        train.iter().enumerate().filter(|(i, _)| i % k == f).collect(),
                    )
                })
                .collect();
            (folds, Vec::new())
        }
    }
}

/// The held-out chains a fold runs: those with a rewording only, if so asked (`only`); then at
/// most `limit`, spread through them.
fn held_out<'a>(
    test: &[(usize, &'a Chain)],
    only: Option<&HashMap<usize, String>>,
    limit: Option<usize>,
) -> Vec<(usize, &'a Chain)> {
    let kept: Vec<(usize, &Chain)> =
        test.iter().filter(|(i, _)| only.is_none_or(|r| r.contains_key(i))).copied().collect();
    spread(&kept, limit)
}

/// Seed recall of one retrieval setting, summed over the folds.
#[derive(Default)]
struct SeedTally {
    label: String,
    usage_weight: f32,
    requests: usize,
    /// Recall sums @3, @5, @10.
    sums: [f64; 3],
}

impl SeedTally {
    fn finish(self) -> SeedRecall {
        let d = self.requests.max(1) as f64;
        SeedRecall {
            retrieval: self.label,
            usage_weight: self.usage_weight,
            requests: self.requests,
            recall_at_3: self.sums[0] / d,
            recall_at_5: self.sums[1] / d,
            recall_at_10: self.sums[2] / d,
        }
    }
}

/// Seed recall of the held-out requests: plain hybrid against hybrid with usage vectors.
async fn tally_seed_recall(
    test: &[&Chain],
    snapshot: &toolgraph_schema::GraphSnapshot,
    retriever: &Retriever,
    embedder: &dyn Embedder,
    settings: &Settings,
    tallies: &mut Vec<SeedTally>,
) -> Result<(), Failed> {
    let id_of: HashMap<&str, &str> = snapshot.apis.values().map(|a| (a.name.as_str(), a.id.as_str())).collect();
    let requests: Vec<String> = test.iter().map(|c| c.input.trim().to_string()).collect();
    let vecs = embedder.embed(requests.clone()).await?;
    let usage_weight = if settings.retrieval.usage_weight > 0.0 { settings.retrieval.usage_weight } else { 0.3 };
    for (wi, (label, w)) in [("hybrid", 0.0f32), ("hybrid + usage vectors", usage_weight)].into_iter().enumerate() {
        while tallies.len() <= wi {
            tallies.push(SeedTally::default());
        }
        let t = &mut tallies[wi];
        t.label = label.to_string();
        t.usage_weight = w;
        for ((c, req), v) in test.iter().zip(&requests).zip(&vecs) {
            let mut gold: Vec<&str> =
                c.output.iter().filter_map(|call| id_of.get(call.name.as_str()).copied()).collect();
            gold.sort_unstable();
            gold.dedup();
            if gold.is_empty() {
                continue;
            }
            let hybrid = toolgraph_engine::retrieval::hybrid::Method::Hybrid;
            let hits = retriever.search_with_usage(req, v, 10, &Default::default(), hybrid, None, w).await?;
            for (ki, k) in [3usize, 5, 10].into_iter().enumerate() {
                let found = gold.iter().filter(|g| hits.iter().take(k).any(|h| h.id == **g)).count();
                t.sums[ki] += found as f64 / gold.len() as f64;
            }
            t.requests += 1;
        }
    }
    Ok(())
}

/// The replay sandbox of one fold: the held-out chains' recorded responses, the protocol that
/// scores against them, an executor whose calls reach it, and the sandbox's stop switch.
struct Replay {
    protocol: Arc<crate::complexfuncbench::Protocol>,
    exec: Executor,
    stop: tokio::sync::oneshot::Sender<()>,
    sandbox: Arc<Sandbox>,
    /// Each held-out chain's own recordings, in the order of the fold's held-out chains: the
    /// sandbox answers a run's calls from its sample's recordings first, as the benchmark's runner
    /// answers a call matching a golden one with that sample's recorded response.
    own: Vec<Vec<toolgraph_sandbox::Recording>>,
}

async fn replay_of(
    test: &[&Chain],
    every: &[toolgraph_sandbox::Recording],
    protocol: Arc<crate::complexfuncbench::Protocol>,
    specs: &[Spec],
    skipped: &mut Vec<String>,
) -> Result<Replay, Failed> {
    let owned: Vec<Chain> = test.iter().map(|c| (*c).clone()).collect();
    let (recs, errors) = recordings(&owned, specs);
    skipped.extend(errors);
    let own = test.iter().map(|c| recordings(std::slice::from_ref(*c), specs).0).collect();
    // The sandbox answers every call recorded in the data, the held-out chains last (a call
    // recorded twice keeps the later) and each run its own sample's first (below),
    // as the live API would have.
    let sb = Sandbox::new(Library::new(every.iter().cloned().chain(recs)), Faults::default());
    let (addr, stop) = sandbox::spawn("127.0.0.1:0", sb.clone())
        .await
        .map_err(|e| input(format!("cannot start the replay sandbox: {e}")))?;
    let exec = Executor::new(ExecSettings {
        rewrites: vec![("https://".into(), format!("http://{addr}/"))],
        timeout_ms: 5_000,
        retries: 1,
        backoff_ms: 20,
        allow_private: vec!["127.0.0.1/32".into()],
        ..ExecSettings::default()
    })?;
    Ok(Replay { protocol, exec, stop, sandbox: sb, own })
}

/// `llm-direct`'s view of a fold: every API of the domain as the model's tools, in a stable order.
struct Direct<'a> {
    by_name: HashMap<String, &'a toolgraph_schema::ApiNode>,
    tools: Vec<Value>,
    opts: crate::direct::DirectOptions,
}

impl<'a> Direct<'a> {
    fn of(snapshot: &'a toolgraph_schema::GraphSnapshot, category: &str) -> Self {
        let mut apis: Vec<&toolgraph_schema::ApiNode> =
            snapshot.apis.values().filter(|a| a.category.eq_ignore_ascii_case(category)).collect();
        apis.sort_by(|a, b| a.name.cmp(&b.name));
        let opts = crate::direct::DirectOptions::default();
        let tools = crate::direct::tool_entries(&apis, &opts);
        let by_name = apis.iter().map(|a| (a.name.clone(), *a)).collect();
        Direct { by_name, tools, opts }
    }
}

/// What one method is scored into: all its runs, and the requests that have a rewording as
/// written and reworded (same gold).
#[derive(Default)]
struct MethodTallies {
    all: Tally,
    as_written: Tally,
    reworded: Tally,
}

/// Where one fold's runs of one method go.
struct Scoring<'r> {
    held_out: &'r [(usize, &'r Chain)],
    direct: &'r Direct<'r>,
    replay: &'r Replay,
    reworded: &'r HashMap<usize, String>,
    report: &'r mut ChainReport,
}

/// One method over the held-out chains of a fold: the model alone (llm-direct), or the engine in
/// the method's mode; each request reworded by hand runs right after its original.
async fn run_method(
    method: &EvalMethod,
    engine: &toolgraph_engine::run::Engine,
    llm: Option<&toolgraph_engine::plan::llm::LlmPlanner>,
    tallies: &mut MethodTallies,
    scoring: &mut Scoring<'_>,
    progress: &mut dyn FnMut(),
) -> Result<(), Failed> {
    let (exec, direct) = (&scoring.replay.exec, scoring.direct);
    let protocol = &scoring.replay.protocol;
    let ask = |request: String| async move {
        Ok::<_, Failed>(match llm {
            Some(llm) => {
                crate::direct::run_direct(llm, &direct.by_name, &direct.tools, exec, &request, &direct.opts).await?
            }
            None => engine.run(&request, Map::new(), None).await?,
        })
    };
    for (i, (index, chain)) in scoring.held_out.iter().enumerate() {
        scoring.replay.sandbox.answer_first(scoring.replay.own.get(i).cloned().unwrap_or_default());
        let gold = match gold_of(chain) {
            Ok(g) => g,
            Err(e) => {
                scoring.report.skipped.push(format!("test chain: {e}"));
                continue;
            }
        };
        let started = Instant::now();
        let r = ask(gold.request.clone()).await?;
        let seconds = started.elapsed().as_secs_f64();
        crate::trace_if_asked(&method.name, &r);
        tallies.all.seconds.push(seconds);
        tallies.all.add(protocol, &gold, &r);
        scoring.report.details.push(detail(protocol, &method.name, &gold, &r));
        progress();
        // The same request reworded: run in the fold where its original is held out, scored
        // against the same gold, beside the as-written run.
        if let Some(words) = scoring.reworded.get(index) {
            tallies.as_written.add(protocol, &gold, &r);
            tallies.as_written.seconds.push(seconds);
            let gold = Gold { request: words.clone(), ..gold };
            let started = Instant::now();
            let r = ask(gold.request.clone()).await?;
            tallies.reworded.seconds.push(started.elapsed().as_secs_f64());
            tallies.reworded.add(protocol, &gold, &r);
            scoring.report.details.push(detail(protocol, &reworded_name(&method.name), &gold, &r));
        }
    }
    Ok(())
}

/// Run the evaluation; `progress(done, total)` after each test chain of each method.
pub async fn run(
    opts: &ChainEvalOptions,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    mut progress: impl FnMut(usize, usize),
) -> Result<ChainReport, Failed> {
    let started = Instant::now();
    let max = 1 << 30;
    let specs = read_specs(&opts.spec, max).map_err(input)?;
    let train_all = read_chains(&opts.train, max).map_err(input)?;
    let test_all = opts.test.as_ref().map(|t| read_chains(t, max).map_err(input)).transpose()?;
    let cache = opts.harness.open_cache()?;
    // Folds: the training chains, and the test chains with their index in the file they come
    // from (what a reworded request names).
    let (folds, split_skipped) = folds_of(&train_all, test_all.as_deref(), opts.harness.folds, opts.harness.split);
    // Every recorded call of the data, what the scorer's response match asks (a chain's errors
    // are reported where it is held out).
    let every = recordings(&[train_all.as_slice(), test_all.as_deref().unwrap_or_default()].concat(), &specs).0;
    // Scored against what was recorded for exactly a call's arguments, in any chain of the data
    // (the stand-in for the live API the published scorer asks; the sandbox's nearest answers
    // never make a call right): the same for every fold.
    let protocol = Arc::new(crate::complexfuncbench::Protocol::new(&specs, &every));
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
    report.split = opts.harness.split.name().to_string();
    report.skipped.extend(reworded_skipped);
    report.skipped_held_out = split_skipped.len();
    report.skipped.extend(split_skipped);
    let mut tallies: Vec<MethodTallies> = opts.harness.methods.iter().map(|_| MethodTallies::default()).collect();
    let only = opts.reworded_only.then_some(&reworded);
    let total: usize = folds.iter().map(|(_, t)| held_out(t, only, opts.harness.limit).len()).sum::<usize>()
        * opts.harness.methods.len();
    let mut done = 0;
    let mut seed_tallies: Vec<SeedTally> = Vec::new();
    for (fi, (train, test)) in folds.iter().enumerate() {
        let dir = tempfile::Builder::new()
            .prefix(&format!("toolgraph-eval-fold{fi}-"))
            .tempdir()
            .map_err(|e| input(format!("cannot create a temporary folder: {e}")))?;
        let learned =
            learn_in(dir.path(), train, &specs, &opts.category, settings, embedder.clone(), cache.clone()).await?;
        let snapshot = Arc::new(learned.stack.store.snapshot().await?);
        let indexed = held_out(test, only, opts.harness.limit);
        let test: Vec<&Chain> = indexed.iter().map(|(_, c)| *c).collect();
        tally_seed_recall(&test, &snapshot, &learned.retriever, embedder.as_ref(), settings, &mut seed_tallies).await?;
        let replay = replay_of(&test, &every, protocol.clone(), &specs, &mut report.skipped).await?;
        let stack = learned.stack(settings, replay.exec.clone(), opts.harness.planner());
        let direct = Direct::of(&snapshot, &opts.category);
        let mut scoring =
            Scoring { held_out: &indexed, direct: &direct, replay: &replay, reworded: &reworded, report: &mut report };
        for (mi, method) in opts.harness.methods.iter().enumerate() {
            let llm = match method.direct {
                true => Some(
                    opts.harness
                        .llm
                        .as_deref()
                        .ok_or_else(|| input(format!("{LLM_DIRECT} needs an LLM: --planner llm")))?,
                ),
                false => None,
            };
            let run_settings = RunSettings {
                mode: method.mode,
                backward: method.backward,
                use_memory: matches!(method.mode, Mode::Graph | Mode::Plan) && opts.harness.run.use_memory,
                remember: false,
                learn: false,
                ..opts.harness.run.clone()
            };
            let engine = stack.engine_over(snapshot.clone(), learned.retriever.clone(), run_settings, None);
            let mut tick = || {
                done += 1;
                progress(done, total);
            };
            run_method(method, &engine, llm, &mut tallies[mi], &mut scoring, &mut tick).await?;
        }
        let _ = replay.stop.send(());
    }
    report.seed_recall = seed_tallies.into_iter().map(SeedTally::finish).collect();
    let names = || opts.harness.methods.iter().map(|m| m.name.as_str());
    report.methods = names().zip(tallies.iter_mut()).map(|(m, t)| t.all.scores(m)).collect();
    if !reworded.is_empty() {
        for (m, t) in names().zip(tallies.iter_mut()) {
            report.methods.push(t.as_written.scores(&format!("{m} · as written")));
            report.methods.push(t.reworded.scores(&reworded_name(m)));
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::tally::{flow_edges, overlap};
    use super::*;
    use crate::gold::args_equal;
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
