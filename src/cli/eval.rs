//! `toolgraph eval`: retrieval, chains, and the public benchmarks with their own metrics.

use super::support::{load_embedder, load_settings, open_store, write_json, Global, PlannerArgs};
use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use toolgraph_schema::{Mode, PlannerKind, Settings};

#[derive(Subcommand)]
pub(super) enum EvalCmd {
    /// Learn from trajectories, plan new ones: graph search against the baselines, executed
    /// against the replay sandbox.
    Chains {
        /// Training chains (ComplexFuncBench format).
        #[arg(long)]
        train: PathBuf,
        /// Test chains; without them, k-fold over --train.
        #[arg(long)]
        test: Option<PathBuf>,
        /// API specs of the chains.
        #[arg(long)]
        spec: PathBuf,
        /// JSON report; a .md table is written beside it.
        #[arg(long, value_name = "FILE")]
        report: PathBuf,
        #[command(flatten)]
        how: HowArgs,
        /// Also retrieve seeds per subtask, not only for the whole request.
        #[arg(long)]
        subtask_retrieval: bool,
        /// Requests reworded by hand (JSON lines: index, original_sha256, reworded), each run in
        /// the fold where its original is held out and reported beside it as written.
        #[arg(long, value_name = "FILE")]
        reworded: Option<PathBuf>,
        /// Only the requests that have a rewording in `--reworded` (as written and reworded);
        /// `--limit` then spreads through those.
        #[arg(long, requires = "reworded")]
        reworded_only: bool,
    },
    /// ComplexFuncBench with its own metrics (Overall Success Rate, Overall Call Acc.): k-fold
    /// over its 613 chains (the graph learned from the other folds), every method in one run,
    /// calls answered by the replay sandbox with the recorded responses; a table next to the
    /// paper's published rows.
    Complexfuncbench {
        /// The benchmark's folder (data.json.gz, spec.json.gz).
        #[arg(long, default_value_os_t = shared_data().join("complexfuncbench"))]
        data: PathBuf,
        /// JSON report; a .md table is written beside it.
        #[arg(long, value_name = "FILE", default_value = ".tgdata/eval/complexfuncbench.json")]
        report: PathBuf,
        /// Requests reworded by hand (e.g. eval/data/reworded/complexfuncbench-dev.jsonl), each
        /// run in the fold where its original is held out and reported beside it as written.
        #[arg(long, value_name = "FILE")]
        reworded: Option<PathBuf>,
        /// Only the requests that have a rewording in `--reworded` (as written and reworded);
        /// `--limit` then spreads through those.
        #[arg(long, requires = "reworded")]
        reworded_only: bool,
        #[command(flatten)]
        how: HowArgs,
    },
    /// Score anyone's predictions by ComplexFuncBench's protocol (the code that scores
    /// toolgraph's own runs): FILE is JSON lines `{"request": "...", "calls": [{"name": "...",
    /// "arguments": {...}}, ...]}` (literal values; or `"turns": [[call, ...], ...]` for calls made
    /// together), each call answered by the replay sandbox over the chains' recordings. The
    /// report holds each request's success, correct and gold calls and first error, and the
    /// paper's Overall Success Rate and Overall Call Acc.
    Score {
        /// The chains the requests come from (ComplexFuncBench format).
        #[arg(long, default_value_os_t = shared_data().join("complexfuncbench/data.json.gz"))]
        chains: PathBuf,
        /// API specs of the chains.
        #[arg(long, default_value_os_t = shared_data().join("complexfuncbench/spec.json.gz"))]
        spec: PathBuf,
        /// The predictions (JSON lines).
        #[arg(long, value_name = "FILE")]
        predictions: PathBuf,
        /// JSON report; a .md summary is written beside it.
        #[arg(long, value_name = "FILE", default_value = ".tgdata/eval/score.json")]
        report: PathBuf,
    },
    /// NESTFUL v1 with its own metrics (F1 Func, F1 Param, Partial / Full Sequence Accuracy):
    /// k-fold within each of its three sets, every method planning the held-out requests (plan
    /// only: nothing is executed); a table next to the published row.
    Nestful {
        /// The benchmark's folder (executable/, non-executable/).
        #[arg(long, default_value_os_t = shared_data().join("nestful_v1"))]
        data: PathBuf,
        /// JSON report; a .md table is written beside it.
        #[arg(long, value_name = "FILE", default_value = ".tgdata/eval/nestful.json")]
        report: PathBuf,
        #[command(flatten)]
        how: HowArgs,
    },
    /// TaskBench (Daily Life APIs) with its own metrics (n-F1, e-F1, t-F1, v-F1) on the gold
    /// records at hand: k-fold, plan only; a table next to the published row.
    Taskbench {
        /// The benchmark's folder (data_dailylifeapis/, gold_sample_transcribed/).
        #[arg(long, default_value_os_t = shared_data().join("taskbench"))]
        data: PathBuf,
        /// JSON report; a .md table is written beside it.
        #[arg(long, value_name = "FILE", default_value = ".tgdata/eval/taskbench.json")]
        report: PathBuf,
        #[command(flatten)]
        how: HowArgs,
    },
    /// API-Bank level-3 (Plan+Retrieve+Call): k-fold, every method executing the held-out
    /// requirements against the replay sandbox serving the recorded outputs; API call
    /// correctness, call-name and argument accuracy, chain success.
    Apibank {
        /// The benchmark's folder (level-3.json, api_definitions_extracted_from_apis_py.json).
        #[arg(long, default_value_os_t = shared_data().join("apibank"))]
        data: PathBuf,
        /// JSON report; a .md table is written beside it.
        #[arg(long, value_name = "FILE", default_value = ".tgdata/eval/apibank.json")]
        report: PathBuf,
        #[command(flatten)]
        how: HowArgs,
    },
    /// ToolBench answers re-planned: each answer file's query planned over the graph learned from
    /// the other files (k-fold) and executed against its recorded observations; pass rate by the
    /// engine's judge.
    Toolbench {
        /// The answer folder (searched recursively).
        #[arg(long, default_value_os_t = shared_data().join("toolbench/answer"))]
        answers: PathBuf,
        /// Tool docs (only the tools the answers use are read).
        #[arg(long, default_value_os_t = shared_data().join("toolenv/tools.jsonl.gz"))]
        tools: PathBuf,
        /// JSON report; a .md table is written beside it.
        #[arg(long, value_name = "FILE", default_value = ".tgdata/eval/toolbench.json")]
        report: PathBuf,
        #[command(flatten)]
        how: HowArgs,
    },
    /// The whole suite (ComplexFuncBench, NESTFUL, TaskBench, API-Bank level-3, ToolBench answers) in one run: each benchmark's JSON
    /// and markdown, and one report (report.md, report.svg) in --out.
    All {
        /// The folder holding the benchmarks (complexfuncbench/, nestful_v1/, taskbench/).
        #[arg(long, default_value_os_t = shared_data())]
        data: PathBuf,
        /// Where the reports go.
        #[arg(long, default_value = ".tgdata/eval")]
        out: PathBuf,
        #[command(flatten)]
        how: HowArgs,
    },
    /// Seed-tool retrieval (bm25, dense, hybrid) on ToolBench / StableToolBench query files.
    Retrieval {
        /// Tool docs whose APIs form the corpus (tools.jsonl(.gz) or a tools/ folder).
        #[arg(long, num_args = 1.., value_name = "FILE", required = true)]
        tools: Vec<PathBuf>,
        /// Query files (`relevant APIs` is the relevant set; their api_list joins the corpus).
        #[arg(long, num_args = 1.., value_name = "FILE", required = true)]
        queries: Vec<PathBuf>,
        /// JSON report; a .md table and a .svg Recall@k plot are written beside it.
        #[arg(long, value_name = "FILE")]
        report: PathBuf,
        /// Embedding cache (default: embed.cache of the config).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Folder of the embedded vector store that holds the evaluation corpus.
        #[arg(long, default_value = ".tgdata/eval-vectors")]
        vectors: PathBuf,
    },
}

/// How chains are evaluated: folds, methods, planner, ablations (every chain evaluation).
#[derive(Args)]
pub(super) struct HowArgs {
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// How a fold's held-out chains are drawn (chain files): `chains`, every k-th; `families`,
    /// whole kinds (the set of APIs a chain calls, pure input providers aside), so every held-out
    /// request is a kind its fold never learned (a chain calling an API its fold never saw is
    /// skipped and counted).
    #[arg(long, default_value = "chains", value_parser = ["chains", "families"])]
    split: String,
    /// At most this many test chains per fold (eval chains / complexfuncbench: evenly spaced
    /// through the fold, a fixed subset that samples all of it).
    #[arg(long)]
    limit: Option<usize>,
    /// Methods to compare, in one run on the same folds (graph-backward: the graph search, target
    /// first; plan: one plan from the solution library, falling back to the search).
    #[arg(long, num_args = 1.., default_values = ["graph", "plan", "retrieve-greedy", "dfs-no-graph"], value_parser = PossibleValuesParser::new(method_names()))]
    methods: Vec<String>,
    #[command(flatten)]
    planner: PlannerArgs,
    /// Ablation: no long-term memory.
    #[arg(long)]
    no_memory: bool,
    /// Ablation: no reflection rounds.
    #[arg(long)]
    no_reflection: bool,
    /// Ablation: weights.beta, the static weight's share in the NEXT weight (1: static only).
    #[arg(long, value_parser = beta_in_range)]
    beta: Option<f64>,
    /// Ablation: retrieval without the graph prior (retrieval.graph_prior = 0).
    #[arg(long)]
    no_graph_prior: bool,
}

fn beta_in_range(v: &str) -> std::result::Result<f64, String> {
    let b: f64 = v.parse().map_err(|_| format!("`{v}` is not a number"))?;
    if (0.0..=1.0).contains(&b) {
        Ok(b)
    } else {
        Err(format!("{b} is not within 0..=1"))
    }
}

impl HowArgs {
    /// The settings with this evaluation's ablations applied.
    fn settings(&self, mut s: Settings) -> Settings {
        if let Some(b) = self.beta {
            s.weights.beta = b;
        }
        if self.no_graph_prior {
            s.retrieval.graph_prior = 0.0;
        }
        s
    }

    fn run_settings(&self, s: &Settings) -> toolgraph_engine::run::RunSettings {
        toolgraph_engine::run::RunSettings {
            use_memory: s.run.use_memory && !self.no_memory,
            reflection_rounds: if self.no_reflection { 0 } else { s.run.reflection_rounds },
            ..s.run.clone()
        }
    }
}

pub(super) async fn run(cli: &Global, cmd: &EvalCmd) -> Result<ExitCode> {
    match cmd {
        EvalCmd::Retrieval { tools, queries, report, cache, vectors } => {
            retrieval(cli, tools, queries, report, cache.as_deref(), vectors).await
        }
        EvalCmd::Chains { train, test, spec, report, how, subtask_retrieval, reworded, reworded_only } => {
            let s = how.settings(load_settings(cli)?);
            let mut run = how.run_settings(&s);
            run.retrieve_subtasks |= *subtask_retrieval;
            let r = chains(
                &s,
                ChainsJob {
                    train: train.clone(),
                    test: test.clone(),
                    spec: spec.clone(),
                    reworded: reworded.clone(),
                    reworded_only: *reworded_only,
                    report,
                    how,
                    run,
                },
            )
            .await?;
            println!("{}", toolgraph_eval::chains::markdown(&r));
            Ok(ExitCode::SUCCESS)
        }
        EvalCmd::Complexfuncbench { data, report, how, reworded, reworded_only } => {
            let s = how.settings(load_settings(cli)?);
            if let Some(dir) = report.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            let r = chains(
                &s,
                ChainsJob {
                    train: data.join("data.json.gz"),
                    test: None,
                    spec: data.join("spec.json.gz"),
                    reworded: reworded.clone(),
                    reworded_only: *reworded_only,
                    report,
                    how,
                    run: how.run_settings(&s),
                },
            )
            .await?;
            println!("{}", toolgraph_eval::chains::markdown(&r));
            Ok(ExitCode::SUCCESS)
        }
        EvalCmd::Score { chains, spec, predictions, report } => score(chains, spec, predictions, report),
        EvalCmd::Nestful { data, report, how } => {
            let s = how.settings(load_settings(cli)?);
            let r = nestful(&s, data, report, how).await?;
            println!("{}", toolgraph_eval::nestful::markdown(&r));
            Ok(ExitCode::SUCCESS)
        }
        EvalCmd::Taskbench { data, report, how } => {
            let s = how.settings(load_settings(cli)?);
            let r = taskbench(&s, data, report, how).await?;
            println!("{}", toolgraph_eval::taskbench::markdown(&r));
            Ok(ExitCode::SUCCESS)
        }
        EvalCmd::Apibank { data, report, how } => {
            let s = how.settings(load_settings(cli)?);
            let r = apibank(&s, data, report, how).await?;
            println!("{}", toolgraph_eval::apibank::markdown(&r));
            Ok(ExitCode::SUCCESS)
        }
        EvalCmd::Toolbench { answers, tools, report, how } => {
            let s = how.settings(load_settings(cli)?);
            let r = toolbench(&s, answers, tools, report, how).await?;
            println!("{}", toolgraph_eval::toolbench::markdown(&r));
            Ok(ExitCode::SUCCESS)
        }
        EvalCmd::All { data, out, how } => all(cli, data, out, how).await,
    }
}

/// `eval retrieval`: seed-tool retrieval against labelled queries.
async fn retrieval(
    cli: &Global,
    tools: &[PathBuf],
    queries: &[PathBuf],
    report: &Path,
    cache: Option<&Path>,
    vectors: &Path,
) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    let embedder = load_embedder(&s).await?;
    let cache_path = cache.map(Path::to_path_buf).unwrap_or_else(|| {
        PathBuf::from(if s.embed.cache.is_empty() { ".tgdata/embeddings.redb" } else { &s.embed.cache })
    });
    let cache = toolgraph_engine::retrieval::cache::EmbeddingCache::open(&cache_path)?;
    let store = toolgraph_engine::adapters::qdrant_edge::EdgeVectorStore::open(vectors, s.vectors.hnsw_ef)?;
    // `--store` given: also measure hybrid+graph with that graph's prior.
    let graph = match &cli.store {
        Some(_) => Some(open_store(&s).await?.node_snapshot().await?),
        None => None,
    };
    let r = toolgraph_eval::retrieval::run(
        tools,
        queries,
        embedder,
        &cache,
        &store,
        toolgraph_eval::retrieval::EvalOptions {
            lexical_weight: s.retrieval.lexical_weight,
            tool_boost: s.retrieval.tool_boost,
            graph: graph.as_ref().map(|g| (g, s.retrieval.graph_prior)),
        },
        progress_log("retrieval", "embedded"),
    )
    .await?;
    write_json(report, &r)?;
    let md = toolgraph_eval::retrieval::markdown(&r);
    std::fs::write(report.with_extension("md"), &md)?;
    std::fs::write(report.with_extension("svg"), toolgraph_eval::retrieval::recall_svg(&r))?;
    println!("{md}");
    Ok(ExitCode::SUCCESS)
}

/// `eval score`: anyone's predictions scored against the gold chains.
fn score(chains: &Path, spec: &Path, predictions: &Path, report: &Path) -> Result<ExitCode> {
    let specs = toolgraph_ingest::complexfuncbench::read_specs(spec, 1 << 30)
        .with_context(|| format!("reading {}", spec.display()))?;
    let chains = toolgraph_ingest::complexfuncbench::read_chains(chains, 1 << 30)
        .with_context(|| format!("reading {}", chains.display()))?;
    let r = toolgraph_eval::predictions::score_file(&chains, &specs, predictions)
        .with_context(|| format!("reading {}", predictions.display()))?;
    if let Some(dir) = report.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_json(report, &r)?;
    let md = toolgraph_eval::predictions::markdown(&r);
    std::fs::write(report.with_extension("md"), &md)?;
    println!("{md}");
    for e in &r.skipped {
        eprintln!("skipped: {}: {e}", predictions.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `eval all`: every benchmark, one report.
async fn all(cli: &Global, data: &Path, out: &Path, how: &HowArgs) -> Result<ExitCode> {
    if how.methods.iter().any(|m| m == toolgraph_eval::chains::LLM_DIRECT) {
        anyhow::bail!("--methods {}: `eval all` runs benchmarks that compare the engine's methods only; run the model-alone baseline with `eval complexfuncbench`", toolgraph_eval::chains::LLM_DIRECT);
    }
    let s = how.settings(load_settings(cli)?);
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let started = Instant::now();
    let cfb_dir = data.join("complexfuncbench");
    let cfb = chains(
        &s,
        ChainsJob {
            train: cfb_dir.join("data.json.gz"),
            test: None,
            spec: cfb_dir.join("spec.json.gz"),
            reworded: None,
            reworded_only: false,
            report: &out.join("complexfuncbench.json"),
            how,
            run: how.run_settings(&s),
        },
    )
    .await?;
    let nf = nestful(&s, &data.join("nestful_v1"), &out.join("nestful.json"), how).await?;
    let tb = taskbench(&s, &data.join("taskbench"), &out.join("taskbench.json"), how).await?;
    let ab = apibank(&s, &data.join("apibank"), &out.join("apibank.json"), how).await?;
    let tbx = toolbench(
        &s,
        &data.join("toolbench/answer"),
        &data.join("toolenv/tools.jsonl.gz"),
        &out.join("toolbench.json"),
        how,
    )
    .await?;
    let mut md = format!("# toolgraph evaluation\n\nEvery benchmark with its own metrics, toolgraph's rows (bold) next to the published ones; methods {}, planner `{}`; {:.0} s in all.\n\n![headline metrics](report.svg)\n\n## ComplexFuncBench\n", how.methods.join(", "), how.planner.planner.name(), started.elapsed().as_secs_f64());
    md.push_str(&toolgraph_eval::chains::paper_table(&cfb));
    md.push('\n');
    md.push_str(&toolgraph_eval::nestful::markdown(&nf));
    md.push('\n');
    md.push_str(&toolgraph_eval::taskbench::markdown(&tb));
    md.push('\n');
    md.push_str(&toolgraph_eval::apibank::markdown(&ab));
    md.push('\n');
    md.push_str(&toolgraph_eval::toolbench::markdown(&tbx));
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("report.svg"), toolgraph_eval::report::svg(&panels(&cfb, &nf, &tb, &ab, &tbx)))?;
    println!("{md}");
    eprintln!("report: {}", out.join("report.md").display());
    Ok(ExitCode::SUCCESS)
}

/// The headline metric of each benchmark: toolgraph's methods and the published rows.
fn panels(
    cfb: &toolgraph_eval::chains::ChainReport,
    nf: &toolgraph_eval::nestful::NestfulReport,
    tb: &toolgraph_eval::taskbench::TaskBenchReport,
    ab: &toolgraph_eval::chains::ChainReport,
    tbx: &toolgraph_eval::toolbench::ToolBenchReport,
) -> Vec<toolgraph_eval::report::Panel> {
    use toolgraph_eval::report::Panel;
    let mut a = Panel { title: "ComplexFuncBench — Overall Success Rate (%)".into(), bars: Vec::new() };
    a.bars.extend(
        toolgraph_eval::complexfuncbench::PUBLISHED.iter().take(2).map(|(m, sr, _)| (m.to_string(), *sr, true)),
    );
    a.bars
        .extend(cfb.methods.iter().map(|m| (format!("toolgraph {}", m.method), 100.0 * m.overall_success_rate, false)));
    let mut b = Panel { title: "NESTFUL v1 — Full Sequence Accuracy (%)".into(), bars: Vec::new() };
    b.bars.extend(
        toolgraph_eval::nestful::PUBLISHED
            .iter()
            .filter_map(|(m, _, _, _, fs, _)| fs.map(|v| (m.to_string(), v, true))),
    );
    b.bars.extend(
        nf.methods.iter().map(|m| (format!("toolgraph {}", m.method), 100.0 * m.full_sequence_accuracy, false)),
    );
    let mut c = Panel { title: "TaskBench Daily Life — n-F1 (%)".into(), bars: Vec::new() };
    c.bars.extend(toolgraph_eval::taskbench::PUBLISHED.iter().map(|(m, n, _, _, _)| (m.to_string(), *n, true)));
    c.bars.extend(tb.methods.iter().map(|m| (format!("toolgraph {}", m.method), 100.0 * m.n_f1, false)));
    let d = Panel {
        title: "API-Bank level-3 — API call correctness (%)".into(),
        bars: ab
            .methods
            .iter()
            .map(|m| (format!("toolgraph {}", m.method), 100.0 * m.call_correctness, false))
            .collect(),
    };
    let mut e = Panel {
        title: format!("ToolBench answers — Pass Rate by the {} judge (%)", tbx.judge),
        bars: vec![("recorded runs (answered)".into(), 100.0 * tbx.recorded_pass_rate, true)],
    };
    e.bars.extend(tbx.methods.iter().map(|m| (format!("toolgraph {}", m.method), 100.0 * m.pass_rate, false)));
    vec![a, b, c, d, e]
}

async fn toolbench(
    s: &Settings,
    answers: &Path,
    tools: &Path,
    report: &Path,
    how: &HowArgs,
) -> Result<toolgraph_eval::toolbench::ToolBenchReport> {
    let opts = toolgraph_eval::toolbench::ToolBenchOptions {
        answers: answers.to_path_buf(),
        tools: tools.to_path_buf(),
        harness: engine_only(harness(s, how)?, "toolbench")?,
    };
    let embedder = load_embedder(s).await?;
    let r = toolgraph_eval::toolbench::run(&opts, s, embedder, progress_log("ToolBench", "planned")).await?;
    write_json(report, &r)?;
    std::fs::write(report.with_extension("md"), toolgraph_eval::toolbench::markdown(&r))?;
    Ok(r)
}

async fn apibank(
    s: &Settings,
    data: &Path,
    report: &Path,
    how: &HowArgs,
) -> Result<toolgraph_eval::chains::ChainReport> {
    let opts = toolgraph_eval::chains::ChainEvalOptions {
        train: PathBuf::new(),
        test: None,
        spec: PathBuf::new(),
        reworded: None,
        reworded_only: false,
        category: String::new(),
        harness: engine_only(harness(s, how)?, "apibank")?,
    };
    let embedder = load_embedder(s).await?;
    let r = toolgraph_eval::apibank::run(data, opts, s, embedder, progress_log("API-Bank", "planned")).await?;
    write_json(report, &r)?;
    std::fs::write(report.with_extension("md"), toolgraph_eval::apibank::markdown(&r))?;
    Ok(r)
}

/// The harness options of `how`: methods, folds, planner, limit, run settings, cache.
fn harness(s: &Settings, how: &HowArgs) -> Result<toolgraph_eval::chains::HarnessOptions> {
    let planner = &how.planner;
    let choice = planner.choice();
    let (chosen, llm) = match planner.planner {
        PlannerKind::Llm => {
            let models = choice.models(s, &[])?;
            (Some(choice.planner(&models)?), choice.llm(&models))
        }
        PlannerKind::Deterministic => (None, None),
    };
    let cache = if s.embed.cache.is_empty() { None } else { Some(PathBuf::from(&s.embed.cache)) };
    if let Some(c) = cache.as_ref().and_then(|c| c.parent()) {
        std::fs::create_dir_all(c)?;
    }
    Ok(toolgraph_eval::chains::HarnessOptions {
        folds: how.folds,
        split: how.split.parse().map_err(anyhow::Error::msg)?,
        methods: how.methods.iter().map(|m| eval_method(m)).collect::<Result<_>>()?,
        planner: chosen,
        llm,
        limit: how.limit,
        run: how.run_settings(s),
        cache,
    })
}

/// The benchmarks other than ComplexFuncBench's chains compare the engine's methods only.
fn engine_only(
    h: toolgraph_eval::chains::HarnessOptions,
    bench: &str,
) -> Result<toolgraph_eval::chains::HarnessOptions> {
    if h.methods.iter().any(|m| m.direct) {
        anyhow::bail!("--methods {}: `eval {bench}` compares the engine's methods; the model-alone baseline runs with `eval chains` and `eval complexfuncbench`", toolgraph_eval::chains::LLM_DIRECT);
    }
    Ok(h)
}

/// An evaluation's progress: on a terminal a bar with the rate and the time left, else a log line
/// every 5 s.
fn progress_log(what: &'static str, verb: &'static str) -> impl FnMut(usize, usize) {
    let bar = if std::io::stderr().is_terminal() { ProgressBar::new(0) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what);
    let mut last = Instant::now();
    move |done, total| {
        if !bar.is_hidden() {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            if done >= total {
                bar.finish_and_clear();
            }
        } else if last.elapsed() >= Duration::from_secs(5) {
            tracing::info!("{what}: {verb} {done}/{total}");
            last = Instant::now();
        }
    }
}

async fn nestful(
    s: &Settings,
    data: &Path,
    report: &Path,
    how: &HowArgs,
) -> Result<toolgraph_eval::nestful::NestfulReport> {
    let opts = engine_only(harness(s, how)?, "nestful")?;
    let embedder = load_embedder(s).await?;
    let r = toolgraph_eval::nestful::run(data, &opts, s, embedder, progress_log("NESTFUL", "planned")).await?;
    write_json(report, &r)?;
    std::fs::write(report.with_extension("md"), toolgraph_eval::nestful::markdown(&r))?;
    Ok(r)
}

async fn taskbench(
    s: &Settings,
    data: &Path,
    report: &Path,
    how: &HowArgs,
) -> Result<toolgraph_eval::taskbench::TaskBenchReport> {
    let opts = engine_only(harness(s, how)?, "taskbench")?;
    let embedder = load_embedder(s).await?;
    let r = toolgraph_eval::taskbench::run(data, &opts, s, embedder, progress_log("TaskBench", "planned")).await?;
    write_json(report, &r)?;
    std::fs::write(report.with_extension("md"), toolgraph_eval::taskbench::markdown(&r))?;
    Ok(r)
}

/// `../shared/data` (or `TOOLGRAPH_SHARED_DATA`): where the public benchmarks are read in place.
fn shared_data() -> PathBuf {
    std::env::var_os("TOOLGRAPH_SHARED_DATA").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("../shared/data"))
}

/// One chain evaluation (`eval chains`, `eval complexfuncbench`).
struct ChainsJob<'a> {
    train: PathBuf,
    test: Option<PathBuf>,
    spec: PathBuf,
    reworded: Option<PathBuf>,
    reworded_only: bool,
    report: &'a Path,
    how: &'a HowArgs,
    run: toolgraph_engine::run::RunSettings,
}

async fn chains(s: &Settings, job: ChainsJob<'_>) -> Result<toolgraph_eval::chains::ChainReport> {
    let embedder = load_embedder(s).await?;
    let harness = toolgraph_eval::chains::HarnessOptions { run: job.run, ..harness(s, job.how)? };
    let opts = toolgraph_eval::chains::ChainEvalOptions {
        train: job.train,
        test: job.test,
        spec: job.spec,
        reworded: job.reworded,
        reworded_only: job.reworded_only,
        category: toolgraph_eval::chains::CATEGORY.into(),
        harness,
    };
    let r = toolgraph_eval::chains::run(&opts, s, embedder, progress_log("chains", "planned")).await?;
    write_json(job.report, &r)?;
    std::fs::write(job.report.with_extension("md"), toolgraph_eval::chains::markdown(&r))?;
    Ok(r)
}

/// The methods an evaluation compares: every run mode, and the graph search target-first.
fn method_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Mode::names().to_vec();
    names.insert(1, "graph-backward");
    names.push(toolgraph_eval::chains::LLM_DIRECT);
    names
}

/// A method by name: a mode, or `MODE-backward` (target-first).
fn eval_method(name: &str) -> Result<toolgraph_eval::chains::EvalMethod> {
    if name == toolgraph_eval::chains::LLM_DIRECT {
        return Ok(toolgraph_eval::chains::EvalMethod::llm_direct());
    }
    let (mode, backward) = match name.strip_suffix("-backward") {
        Some(m) => (m, true),
        None => (name, false),
    };
    Ok(toolgraph_eval::chains::EvalMethod {
        name: name.to_string(),
        mode: mode.parse::<Mode>().map_err(|e| anyhow::anyhow!("method {e}"))?,
        backward,
        direct: false,
    })
}
