//! `toolgraph eval`: retrieval, chains, and the public benchmarks with their own metrics.

use super::*;

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
    /// At most this many test chains per fold.
    #[arg(long)]
    limit: Option<usize>,
    /// Methods to compare, in one run on the same folds (graph-backward: the graph search, target
    /// first; plan: one plan from the solution library, falling back to the search).
    #[arg(long, num_args = 1.., default_values = ["graph", "plan", "retrieve-greedy", "dfs-no-graph"], value_parser = ["graph", "graph-backward", "plan", "dfs-no-graph", "retrieve-greedy"])]
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
        toolgraph_engine::run::RunSettings { use_memory: s.run.use_memory && !self.no_memory, reflection_rounds: if self.no_reflection { 0 } else { s.run.reflection_rounds }, ..s.run.clone() }
    }
}

pub(super) async fn run(cli: &Cli, cmd: &EvalCmd) -> Result<ExitCode> {
    match cmd {
        EvalCmd::Retrieval { tools, queries, report, cache, vectors } => {
            let s = load_settings(cli)?;
            let embedder = load_embedder(&s).await?;
            let cache_path = cache.clone().unwrap_or_else(|| PathBuf::from(if s.embed.cache.is_empty() { ".tgdata/embeddings.redb" } else { &s.embed.cache }));
            let cache = toolgraph_engine::retrieval::cache::EmbeddingCache::open(&cache_path)?;
            let store = toolgraph_engine::adapters::qdrant_edge::EdgeVectorStore::open(vectors, s.vectors.hnsw_ef)?;
            // `--store` given: also measure hybrid+graph with that graph's prior.
            let graph = match &cli.store {
                Some(_) => Some(open_store(&s).await?.node_snapshot().await?),
                None => None,
            };
            let mut last = Instant::now();
            let r = toolgraph_eval::retrieval::run(tools, queries, embedder, &cache, &store, toolgraph_eval::retrieval::EvalOptions { lexical_weight: s.retrieval.lexical_weight, tool_boost: s.retrieval.tool_boost, graph: graph.as_ref().map(|g| (g, s.retrieval.graph_prior)) }, |n| {
                if last.elapsed() >= Duration::from_secs(5) {
                    tracing::info!("embedded {n} corpus texts");
                    last = Instant::now();
                }
            })
            .await?;
            write_json(report, &r)?;
            let md = toolgraph_eval::retrieval::markdown(&r);
            std::fs::write(report.with_extension("md"), &md)?;
            std::fs::write(report.with_extension("svg"), toolgraph_eval::retrieval::recall_svg(&r))?;
            println!("{md}");
            Ok(ExitCode::SUCCESS)
        }
        EvalCmd::Chains { train, test, spec, report, how, subtask_retrieval } => {
            let s = how.settings(load_settings(cli)?);
            let mut run = how.run_settings(&s);
            run.retrieve_subtasks |= *subtask_retrieval;
            chains(&s, ChainsJob { train: train.clone(), test: test.clone(), spec: spec.clone(), report, how, run }).await
        }
        EvalCmd::Complexfuncbench { data, report, how } => {
            let s = how.settings(load_settings(cli)?);
            if let Some(dir) = report.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            chains(&s, ChainsJob { train: data.join("data.json.gz"), test: None, spec: data.join("spec.json.gz"), report, how, run: how.run_settings(&s) }).await
        }
    }
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
    report: &'a Path,
    how: &'a HowArgs,
    run: toolgraph_engine::run::RunSettings,
}

async fn chains(s: &Settings, job: ChainsJob<'_>) -> Result<ExitCode> {
    let planner = &job.how.planner;
    let chosen = if planner.planner == "llm" { Some(models_of(s, planner, &[])?.planner("llm", planner.llm_model.as_deref()).map_err(|e| anyhow::anyhow!(e))?) } else { None };
    let embedder = load_embedder(s).await?;
    let cache = if s.embed.cache.is_empty() { None } else { Some(PathBuf::from(&s.embed.cache)) };
    if let Some(c) = cache.as_ref().and_then(|c| c.parent()) {
        std::fs::create_dir_all(c)?;
    }
    let opts = toolgraph_eval::chains::ChainEvalOptions {
        train: job.train,
        test: job.test,
        spec: job.spec,
        folds: job.how.folds,
        methods: job.how.methods.iter().map(|m| toolgraph_eval::chains::EvalMethod { name: m.clone(), mode: mode_of(m), backward: m == "graph-backward" }).collect(),
        planner: chosen,
        limit: job.how.limit,
        run: job.run,
        cache,
    };
    let mut last = Instant::now();
    let r = toolgraph_eval::chains::run(&opts, s, embedder, |done, total| {
        if last.elapsed() >= Duration::from_secs(5) {
            tracing::info!("planned {done}/{total} chains");
            last = Instant::now();
        }
    })
    .await?;
    write_json(job.report, &r)?;
    let md = toolgraph_eval::chains::markdown(&r);
    std::fs::write(job.report.with_extension("md"), &md)?;
    println!("{md}");
    Ok(ExitCode::SUCCESS)
}
