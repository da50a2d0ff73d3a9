use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgraph_engine::graph::CypherLimits;
use toolgraph_engine::{settings, store, GraphStore};
use toolgraph_ingest::{complexfuncbench, Inputs, Progress};
use toolgraph_schema::Settings;

#[derive(Parser)]
#[command(name = "toolgraph", version, about = "Learn how API tools are used together; plan and run tool chains")]
struct Cli {
    /// Config file (TOML), layered over the built-in defaults and under TOOLGRAPH__* variables.
    #[arg(long, global = true, env = "TOOLGRAPH_CONFIG")]
    config: Option<PathBuf>,
    /// Graph store: embedded:PATH | neo4j://HOST:PORT | falkordb://HOST:PORT (overrides config).
    #[arg(long, global = true)]
    store: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build or extend the tool graph from tool docs and trajectories.
    Ingest(IngestArgs),
    /// Inspect the tool graph.
    #[command(subcommand)]
    Graph(GraphCmd),
    /// Convert other formats into toolgraph's JSONL runs.
    #[command(subcommand)]
    Convert(ConvertCmd),
    /// Measure toolgraph against public benchmarks.
    #[command(subcommand)]
    Eval(EvalCmd),
    /// Embed the graph's APIs into the vector store (only new or changed ones).
    Index {
        /// Rebuild into a fresh collection and switch to it at the end.
        #[arg(long)]
        rebuild: bool,
    },
    /// Plan and execute a tool chain for a request; prints the chain, the calls and the answer.
    Ask(AskArgs),
    /// Serve recorded tool responses over HTTP (the replay sandbox), with optional fault injection.
    Sandbox(SandboxArgs),
    /// Run the daemon: orchestration over HTTP (SSE streaming), sessions, tool registration,
    /// Cypher inspection, health, readiness and metrics.
    Serve(ServeArgs),
    /// Serve toolgraph as an MCP server over stdin/stdout (for MCP clients' configs): the tools
    /// search_tools, orchestrate, execute_chain, get_run, graph_neighbors and runs as resources.
    /// The daemon serves the same at /mcp (Streamable HTTP).
    #[cfg(feature = "mcp")]
    Mcp(McpArgs),
    /// Users and API keys of the daemon (in its state store, `state.url`).
    #[command(subcommand)]
    Users(crate::users::UsersCmd),
    /// Tool sources beyond trajectories and docs: MCP servers.
    #[command(subcommand)]
    Tools(ToolsCmd),
    /// Rank APIs for a request (seed-tool retrieval).
    Search {
        /// The request text.
        query: String,
        #[arg(short, default_value_t = 10)]
        k: usize,
        /// Only APIs of this category (name or slug).
        #[arg(long)]
        category: Option<String>,
        /// Only APIs of this tool (name or slug).
        #[arg(long)]
        tool: Option<String>,
        /// bm25, dense or hybrid.
        #[arg(long, default_value = "hybrid")]
        method: toolgraph_engine::retrieval::hybrid::Method,
        /// Re-rank with the graph prior (availability; co-usage with --after APIs).
        #[arg(long)]
        graph_prior: bool,
        /// APIs already chosen (ids); their successors get the co-usage prior.
        #[arg(long, num_args = 1.., value_name = "API_ID")]
        after: Vec<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct AskArgs {
    /// The request.
    request: String,
    #[command(flatten)]
    planner: PlannerArgs,
    /// graph, plan, dfs-no-graph or retrieve-greedy (default: run.mode of the config, graph).
    #[arg(long, value_parser = ["graph", "plan", "dfs-no-graph", "retrieve-greedy"])]
    mode: Option<String>,
    /// Target-first: call the API that answers first, complete its inputs backwards.
    #[arg(long)]
    backward: bool,
    /// Rewrite tool URLs: FROM=TO (e.g. https://=http://127.0.0.1:8765/ for the replay sandbox).
    #[arg(long = "rewrite", value_name = "FROM=TO")]
    rewrites: Vec<String>,
    /// Values for parameters the run asked for (needs_input): NAME=JSON.
    #[arg(long = "given", value_name = "NAME=JSON")]
    given: Vec<String>,
    /// Neither learn weights nor store a memory from this run.
    #[arg(long)]
    no_learn: bool,
    /// Print the whole run report (trace included) as JSON.
    #[arg(long)]
    json: bool,
}

/// Who decides in `ask` and `serve`.
#[derive(Args, Clone)]
struct PlannerArgs {
    /// Who decides: the deterministic planner (default) or an OpenAI-compatible LLM.
    #[arg(long, default_value = "deterministic", value_parser = ["deterministic", "llm"])]
    planner: String,
    /// For --planner llm: a model configured under [llm.models.NAME] (default: llm.default).
    #[arg(long, value_name = "NAME")]
    llm_model: Option<String>,
    /// For --planner llm: an OpenAI-compatible base URL used instead of the configured models
    /// (key from TOOLGRAPH_LLM_API_KEY or TOOLGRAPH_LLM_API_KEY_FILE).
    #[arg(long, env = "TOOLGRAPH_LLM_URL", value_name = "URL")]
    llm_url: Option<String>,
    /// With --llm-url: the model name the endpoint expects.
    #[arg(long, env = "TOOLGRAPH_LLM_MODEL", default_value = "local", value_name = "MODEL")]
    llm_endpoint_model: String,
}

#[derive(Args)]
struct ServeArgs {
    /// Port (overrides server.port).
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on (overrides server.host). Without API keys only loopback is allowed
    /// unless server.allow_anonymous is set.
    #[arg(long)]
    host: Option<String>,
    /// Rewrite tool URLs: FROM=TO (e.g. https://=http://127.0.0.1:8765/ for the replay sandbox).
    #[arg(long = "rewrite", value_name = "FROM=TO")]
    rewrites: Vec<String>,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[cfg(feature = "mcp")]
#[derive(Args)]
struct McpArgs {
    /// Rewrite tool URLs: FROM=TO (e.g. https://=http://127.0.0.1:8765/ for the replay sandbox).
    #[arg(long = "rewrite", value_name = "FROM=TO")]
    rewrites: Vec<String>,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[derive(Args)]
struct SandboxArgs {
    /// ComplexFuncBench chains whose recorded responses are served.
    #[arg(long, num_args = 1.., value_name = "FILE", required = true)]
    chains: Vec<PathBuf>,
    /// Their API specs (routes and required parameters).
    #[arg(long)]
    spec: PathBuf,
    #[arg(long, default_value_t = 8765)]
    port: u16,
    /// Fixed latency added to every response, ms.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Share of requests held back for --hang-ms (client time-outs).
    #[arg(long, default_value_t = 0.0)]
    timeout_rate: f64,
    #[arg(long, default_value_t = 30_000)]
    hang_ms: u64,
    /// Share of requests answered 500.
    #[arg(long, default_value_t = 0.0)]
    error_rate: f64,
    /// Share of requests answered 429 with Retry-After.
    #[arg(long, default_value_t = 0.0)]
    throttle_rate: f64,
    #[arg(long, default_value_t = 1)]
    retry_after_s: u64,
    /// Share of requests answered with malformed JSON.
    #[arg(long, default_value_t = 0.0)]
    garbage_rate: f64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Subcommand)]
enum EvalCmd {
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
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// At most this many test chains per fold.
        #[arg(long)]
        limit: Option<usize>,
        /// Methods to compare (graph-backward: the graph search, target first; plan: one plan
        /// from the solution library, falling back to the search).
        #[arg(long, num_args = 1.., default_values = ["graph", "plan", "retrieve-greedy", "dfs-no-graph"], value_parser = ["graph", "graph-backward", "plan", "dfs-no-graph", "retrieve-greedy"])]
        methods: Vec<String>,
        #[command(flatten)]
        planner: PlannerArgs,
        /// Turn long-term memory off for the graph method.
        #[arg(long)]
        no_memory: bool,
        /// Also retrieve seeds per subtask, not only for the whole request.
        #[arg(long)]
        subtask_retrieval: bool,
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

#[derive(Args)]
struct IngestArgs {
    /// ToolBench answer folders or files (DFSDT / CoT `*.json`, searched recursively).
    #[arg(long, num_args = 1.., value_name = "DIR")]
    toolbench: Vec<PathBuf>,
    /// ToolBench / StableToolBench query files (their api_list documents APIs).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    queries: Vec<PathBuf>,
    /// Tool docs: tools.jsonl(.gz) or a ToolBench tools/ folder.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    tools: Vec<PathBuf>,
    /// toolgraph JSONL runs (one run per line).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    trajectories: Vec<PathBuf>,
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Do not embed the APIs into the vector store afterwards (run `toolgraph index` later).
    #[arg(long)]
    no_index: bool,
}

#[derive(Subcommand)]
enum ToolsCmd {
    /// Import an MCP server's tools as APIs (category `mcp`, tool NAME): over stdio (`--command`,
    /// run as a child process) or Streamable HTTP (`--url`); remembered in the state store, so
    /// `ask` and the daemon call them (`tools/call`) and follow their tool list.
    AddMcp {
        #[arg(long)]
        name: String,
        /// The server's command line (no shell; quotes group words).
        #[arg(long, conflicts_with = "url", required_unless_present = "url")]
        command: Option<String>,
        #[arg(long)]
        url: Option<String>,
    },
    /// The MCP servers the state store knows, connected now.
    Mcp,
}

#[derive(Subcommand)]
enum GraphCmd {
    /// Node and edge counts.
    Stats,
    /// Top-k successors of an API (or START) by blended weight.
    Neighbors {
        id: String,
        #[arg(short, default_value_t = 5)]
        k: usize,
    },
    /// A read-only Cypher query (FalkorDB and Neo4j stores).
    Cypher {
        query: String,
        /// Query parameters as NAME=JSON (e.g. --param id='"data/x/y"' or --param k=5).
        #[arg(long = "param", value_name = "NAME=JSON")]
        params: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ConvertCmd {
    /// ComplexFuncBench (NESTFUL format) chains + spec → JSONL runs + tools.jsonl.
    Complexfuncbench {
        #[arg(long)]
        data: PathBuf,
        #[arg(long)]
        spec: PathBuf,
        /// Where the JSONL runs go.
        #[arg(long)]
        out: PathBuf,
        /// Where the tool docs go (RapidAPI tools.jsonl layout).
        #[arg(long)]
        tools_out: PathBuf,
        /// Category of the APIs (booking-com15 is RapidAPI's Travel category).
        #[arg(long, default_value = "Travel")]
        category: String,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // neo4rs logs every new connection pool (and that `neo4j://` routing is "experimental") at
    // info/warn level: quiet unless TOOLGRAPH_LOG names it.
    let mut filter = std::env::var("TOOLGRAPH_LOG").unwrap_or_else(|_| "info,ingest=warn,qdrant_edge=error".into());
    if !filter.contains("neo4rs") {
        filter.push_str(",neo4rs=error");
    }
    // rmcp logs every message of an MCP connection at info level.
    if !filter.contains("rmcp") {
        filter.push_str(",rmcp=warn");
    }
    // Log lines to stderr; spans also over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set (flushed
    // when `_telemetry` is dropped at the end of main).
    let _telemetry = toolgraph_server::telemetry::init(&filter, std::io::stderr);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_settings(cli: &Cli) -> Result<Settings> {
    let mut overrides = Vec::new();
    if let Some(s) = &cli.store {
        overrides.push(("store.uri", s.clone()));
    }
    Ok(settings::load(cli.config.as_deref(), &overrides)?)
}

async fn open_store(s: &Settings) -> Result<Arc<dyn GraphStore>> {
    store::open(&s.store).await.with_context(|| format!("opening store {}", s.store.uri))
}

async fn load_embedder(s: &Settings) -> Result<Arc<dyn toolgraph_engine::embed::Embedder>> {
    let embed = s.embed.clone();
    let e = tokio::task::spawn_blocking(move || toolgraph_engine::adapters::fastembed::FastEmbedder::load(&embed)).await??;
    Ok(Arc::new(e))
}

/// Embed the graph's APIs into the vector store; prints what changed.
async fn index(s: &Settings, graph: &dyn GraphStore, rebuild: bool) -> Result<()> {
    let embedder = load_embedder(s).await?;
    let vectors = store::open_vectors(&s.vectors)?;
    let cache = if s.embed.cache.is_empty() {
        None
    } else {
        Some(toolgraph_engine::retrieval::cache::EmbeddingCache::open(Path::new(&s.embed.cache))?)
    };
    let bar = if std::io::stderr().is_terminal() { ProgressBar::new(0) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} {per_sec} eta {eta}").unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message("embedding");
    let mut last = Instant::now();
    let r = toolgraph_engine::retrieval::index::index_graph(
        graph,
        vectors.as_ref(),
        embedder.as_ref(),
        cache.as_ref(),
        s.retrieval.index_chunk,
        rebuild,
        |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            if bar.is_hidden() && last.elapsed() >= Duration::from_secs(10) {
                tracing::info!("embedded {done}/{total} APIs");
                last = Instant::now();
            }
        },
    )
    .await?;
    bar.finish_and_clear();
    eprintln!(
        "indexed into {} ({}): {} APIs, {} embedded ({} by the model{}), {} payload updates, {} unchanged, {} deleted; {:.1}s",
        vectors.backend(),
        s.vectors.uri,
        r.documents,
        r.embedded,
        r.embedded_by_model,
        r.sentences_per_s.map(|v| format!(", {v:.0} sentences/s")).unwrap_or_default(),
        r.payload_updated,
        r.unchanged,
        r.deleted,
        r.seconds
    );
    Ok(())
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Ingest(args) => ingest(&cli, args).await,
        Command::Graph(cmd) => graph(&cli, cmd).await,
        Command::Index { rebuild } => {
            let s = load_settings(&cli)?;
            let graph = open_store(&s).await?;
            index(&s, graph.as_ref(), *rebuild).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Search { query, k, category, tool, method, graph_prior, after, json } => {
            let s = load_settings(&cli)?;
            let vectors = store::open_vectors(&s.vectors)?;
            let embedder = load_embedder(&s).await?;
            let retriever = toolgraph_engine::retrieval::hybrid::Retriever::load(vectors, embedder, None, s.retrieval.clone())
                .await
                .context("loading the API index (run `toolgraph ingest` or `toolgraph index` first)")?;
            let prior = if *graph_prior || !after.is_empty() {
                let graph = open_store(&s).await?;
                let snap = graph.snapshot().await?;
                Some(toolgraph_engine::retrieval::hybrid::GraphPrior::from_snapshot(&snap, after))
            } else {
                None
            };
            let filter = toolgraph_engine::retrieval::Filter { category: category.clone(), tool: tool.clone(), status: None };
            let hits = retriever.search(query, *k, &filter, *method, prior.as_ref()).await?;
            // Written without println!, so a closed pipe (`| head`) ends quietly.
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&hits)?)
            } else {
                let mut r = writeln!(out, "{:>4}  {:>6}  {:<60}  {:<30}  category", "rank", "score", "api", "tool");
                for (i, h) in hits.iter().enumerate() {
                    r = r.and_then(|_| writeln!(out, "{:>4}  {:>6.3}  {:<60}  {:<30}  {}", i + 1, h.score, h.id, h.tool, h.category));
                }
                r
            };
            if hits.is_empty() {
                eprintln!("no APIs matched (index holds {} APIs)", retriever.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(EvalCmd::Retrieval { tools, queries, report, cache, vectors }) => {
            let s = load_settings(&cli)?;
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
            let r = toolgraph_ingest::eval_retrieval::run(tools, queries, embedder, &cache, &store, toolgraph_ingest::eval_retrieval::EvalOptions { lexical_weight: s.retrieval.lexical_weight, tool_boost: s.retrieval.tool_boost, graph: graph.as_ref().map(|g| (g, s.retrieval.graph_prior)) }, |n| {
                if last.elapsed() >= Duration::from_secs(5) {
                    tracing::info!("embedded {n} corpus texts");
                    last = Instant::now();
                }
            })
            .await?;
            write_json(report, &r)?;
            let md = toolgraph_ingest::eval_retrieval::markdown(&r);
            std::fs::write(report.with_extension("md"), &md)?;
            std::fs::write(report.with_extension("svg"), toolgraph_ingest::eval_retrieval::recall_svg(&r))?;
            println!("{md}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(EvalCmd::Chains { train, test, spec, report, folds, limit, methods, planner, no_memory, subtask_retrieval }) => {
            let s = load_settings(&cli)?;
            let chosen = if planner.planner == "llm" { Some(models_of(&s, planner, &[])?.planner("llm", planner.llm_model.as_deref()).map_err(|e| anyhow::anyhow!(e))?) } else { None };
            let embedder = load_embedder(&s).await?;
            let cache = if s.embed.cache.is_empty() { None } else { Some(PathBuf::from(&s.embed.cache)) };
            if let Some(c) = cache.as_ref().and_then(|c| c.parent()) {
                std::fs::create_dir_all(c)?;
            }
            let opts = toolgraph_ingest::eval_chains::ChainEvalOptions {
                train: train.clone(),
                test: test.clone(),
                spec: spec.clone(),
                folds: *folds,
                methods: methods.iter().map(|m| toolgraph_ingest::eval_chains::EvalMethod { name: m.clone(), mode: mode_of(m), backward: m == "graph-backward" }).collect(),
                planner: chosen,
                limit: *limit,
                run: toolgraph_engine::run::RunSettings { use_memory: s.run.use_memory && !no_memory, retrieve_subtasks: s.run.retrieve_subtasks || *subtask_retrieval, ..s.run.clone() },
                cache,
            };
            let mut last = Instant::now();
            let r = toolgraph_ingest::eval_chains::run(&opts, &s, embedder, |done, total| {
                if last.elapsed() >= Duration::from_secs(5) {
                    tracing::info!("planned {done}/{total} chains");
                    last = Instant::now();
                }
            })
            .await?;
            write_json(report, &r)?;
            let md = toolgraph_ingest::eval_chains::markdown(&r);
            std::fs::write(report.with_extension("md"), &md)?;
            println!("{md}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Ask(args) => ask(&cli, args).await,
        Command::Sandbox(args) => sandbox(args).await,
        Command::Serve(args) => serve(&cli, args).await,
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => mcp_stdio(&cli, args).await,
        Command::Users(cmd) => {
            let s = load_settings(&cli)?;
            crate::users::run(&s.state.url, s.state.max_connections, cmd).await
        }
        Command::Tools(cmd) => tools(&cli, cmd).await,
        Command::Convert(ConvertCmd::Complexfuncbench { data, spec, out, tools_out, category }) => {
            let c = complexfuncbench::convert(data, spec, out, tools_out, category)?;
            for e in &c.errors {
                eprintln!("skipped: {e}");
            }
            println!("{}", serde_json::to_string_pretty(&c)?);
            Ok(if c.runs == 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
    }
}

fn mode_of(m: &str) -> toolgraph_engine::run::Mode {
    match m {
        "dfs-no-graph" => toolgraph_engine::run::Mode::DfsNoGraph,
        "retrieve-greedy" => toolgraph_engine::run::Mode::RetrieveGreedy,
        "plan" => toolgraph_engine::run::Mode::Plan,
        _ => toolgraph_engine::run::Mode::Graph,
    }
}

/// NAME=VALUE pairs; the value is JSON, or a plain string when it is not JSON.
fn pairs(items: &[String], what: &str) -> Result<Vec<(String, serde_json::Value)>> {
    items
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').with_context(|| format!("{what} `{p}` is not NAME=VALUE"))?;
            Ok((k.to_string(), serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()))))
        })
        .collect()
}

async fn ask(cli: &Cli, args: &AskArgs) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    let graph = open_store(&s).await?;
    let snapshot = Arc::new(graph.snapshot().await?);
    if snapshot.apis.is_empty() {
        bail!("the graph holds no APIs: run `toolgraph ingest` first");
    }
    let vectors = store::open_vectors(&s.vectors)?;
    let embedder = load_embedder(&s).await?;
    let retriever = Arc::new(
        toolgraph_engine::retrieval::hybrid::Retriever::load(vectors.clone(), embedder.clone(), None, s.retrieval.clone())
            .await
            .context("loading the API index (run `toolgraph ingest` or `toolgraph index` first)")?,
    );
    let memory = Arc::new(toolgraph_engine::run::memory::Memory::open(vectors, embedder.dim()).await?);
    let rewrites = pairs(&args.rewrites, "--rewrite")?.into_iter().map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect();
    let exec = toolgraph_engine::exec::Executor::new(exec_settings(&s, rewrites))?;
    mcp_remote(&s, &snapshot, &exec).await?;
    let categories: Vec<String> = snapshot.categories.values().map(|c| c.name.clone()).collect();
    let planner = planner_of(&s, &args.planner, &categories)?;
    let run_settings = toolgraph_engine::run::RunSettings {
        mode: args.mode.as_deref().map(mode_of).unwrap_or(s.run.mode),
        backward: s.run.backward || args.backward,
        learn: s.run.learn && !args.no_learn,
        remember: s.run.remember && !args.no_learn,
        ..s.run.clone()
    };
    let engine = toolgraph_engine::run::Engine::new(toolgraph_engine::run::EngineParts {
        graph: snapshot,
        store: Some(graph),
        retriever,
        memory: Some(memory),
        executor: exec,
        planner,
        settings: run_settings,
        weights: s.weights,
        health: None,
    });
    let given: serde_json::Map<String, serde_json::Value> = pairs(&args.given, "--given")?.into_iter().collect();
    let r = engine.run(&args.request, given, None).await?;
    // The graph learns from this run too (counts; the chain when answered), once per run id.
    let run_id = format!("cli_{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default());
    if let Err(e) = engine.learn_from(&run_id, &r).await {
        tracing::warn!(error = %e, "learning from the run failed");
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&r)?);
    } else {
        let _ = writeln!(out, "status: {}", r.status.as_str());
        for c in &r.chain {
            let _ = writeln!(out, "  {} = {}({})", c.label, c.name, serde_json::Value::Object(c.arguments.clone()));
        }
        let _ = writeln!(out, "answer: {}", r.answer);
        let _ = writeln!(
            out,
            "{} calls ({} failed), {} backtracks, {} reflections, {} planner decisions{}; engine {:.1} ms, tools {:.1} ms, embedding {:.1} ms",
            r.stats.http_calls, r.stats.failed_calls, r.stats.backtracks, r.stats.reflections, r.stats.planner_calls, if r.stats.recalled { ", replayed from memory" } else { "" }, r.stats.engine_ms, r.stats.http_ms, r.stats.embed_ms
        );
    }
    Ok(match r.status {
        toolgraph_engine::run::Status::Answered => ExitCode::SUCCESS,
        toolgraph_engine::run::Status::NeedsInput => ExitCode::from(3),
        toolgraph_engine::run::Status::GaveUp => ExitCode::from(2),
        toolgraph_engine::run::Status::Partial => ExitCode::from(4),
    })
}

/// The MCP servers of the state store, plugged into `exec` when the graph has MCP tools.
#[cfg(feature = "mcp")]
async fn mcp_remote(s: &Settings, graph: &toolgraph_schema::GraphSnapshot, exec: &toolgraph_engine::exec::Executor) -> Result<()> {
    if !graph.apis.values().any(|a| a.url.starts_with(toolgraph_engine::exec::MCP_SCHEME)) {
        return Ok(());
    }
    let state = toolgraph_server::state::StateStore::open(&s.state.url, s.state.max_connections).await.with_context(|| "opening the state store (state.url) for its MCP servers")?;
    let hub = toolgraph_server::mcp::McpHub::from_state(&state, Some(exec.clone())).await.map_err(anyhow::Error::msg)?;
    exec.set_remote(hub);
    Ok(())
}

#[cfg(feature = "mcp")]
async fn tools(cli: &Cli, cmd: &ToolsCmd) -> Result<ExitCode> {
    use toolgraph_server::mcp::{import, McpHub, McpServer};
    let s = load_settings(cli)?;
    let state = toolgraph_server::state::StateStore::open(&s.state.url, s.state.max_connections).await.with_context(|| "opening the state store (state.url)")?;
    match cmd {
        ToolsCmd::AddMcp { name, command, url } => {
            let def = McpServer { name: name.clone(), command: command.clone(), url: url.clone() };
            def.check().map_err(|e| anyhow::anyhow!("--name/--command/--url: {e}"))?;
            let graph = open_store(&s).await?;
            graph.setup().await?;
            let exec = toolgraph_engine::exec::Executor::new(exec_settings(&s, Vec::new()))?;
            let hub = McpHub::new(vec![def.clone()], Some(exec));
            let imported = import(&hub, name, graph.as_ref()).await.map_err(|e| anyhow::anyhow!("MCP server `{name}`: {e}"))?;
            state.put_mcp_server(&def, "cli").await.map_err(anyhow::Error::msg)?;
            index(&s, graph.as_ref(), false).await?;
            println!("MCP server {name}: {} tools imported{}", imported.admitted.len(), if imported.invalidated.is_empty() { String::new() } else { format!(", {} no longer listed (invalidated)", imported.invalidated.len()) });
            for id in &imported.admitted {
                println!("  {id}");
            }
            Ok(ExitCode::SUCCESS)
        }
        ToolsCmd::Mcp => {
            let servers = state.mcp_servers().await.map_err(anyhow::Error::msg)?;
            for d in &servers {
                println!("{}\t{}", d.name, d.url.clone().or(d.command.clone()).unwrap_or_default());
            }
            if servers.is_empty() {
                println!("no MCP servers (toolgraph tools add-mcp --name NAME --command 'CMD' | --url URL)");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(not(feature = "mcp"))]
async fn mcp_remote(_s: &Settings, _graph: &toolgraph_schema::GraphSnapshot, _exec: &toolgraph_engine::exec::Executor) -> Result<()> {
    Ok(())
}

#[cfg(not(feature = "mcp"))]
async fn tools(_cli: &Cli, _cmd: &ToolsCmd) -> Result<ExitCode> {
    bail!("this toolgraph was built without the `mcp` feature")
}

/// Execution settings from the config, with `--rewrite` targets on this machine allow-listed (the
/// user pointed the calls there, e.g. at the replay sandbox).
fn exec_settings(s: &Settings, rewrites: Vec<(String, String)>) -> toolgraph_engine::exec::ExecSettings {
    let mut e = s.exec.clone();
    for (_, to) in &rewrites {
        let host = to.split("://").nth(1).unwrap_or(to).split('/').next().unwrap_or_default();
        if host.starts_with("127.") || host.starts_with("localhost") {
            e.allow_private.push("127.0.0.0/8".into());
        } else if host.starts_with("[::1]") {
            e.allow_private.push("::1/128".into());
        }
    }
    e.rewrites.extend(rewrites);
    e
}

/// The models a command may use: the configured ones, or the one `--llm-url` names.
fn models_of(s: &Settings, args: &PlannerArgs, categories: &[String]) -> Result<toolgraph_engine::plan::models::Models> {
    use toolgraph_engine::plan::llm::{LlmPlanner, LlmSettings};
    Ok(match &args.llm_url {
        Some(url) => {
            let key = std::env::var("TOOLGRAPH_LLM_API_KEY").ok().or_else(|| std::env::var("TOOLGRAPH_LLM_API_KEY_FILE").ok().and_then(|p| std::fs::read_to_string(p).ok()).map(|k| k.trim().to_string())).map(secrecy::SecretString::from);
            let name = args.llm_model.clone().unwrap_or_else(|| "cli".into());
            let p = LlmPlanner::new(LlmSettings { name: name.clone(), base_url: url.clone(), model: args.llm_endpoint_model.clone(), ..Default::default() }, key)?.with_categories(categories.to_vec());
            toolgraph_engine::plan::models::Models::single(&name, p)
        }
        None => toolgraph_engine::plan::models::Models::from_config(&s.llm, categories)?,
    })
}

fn planner_of(s: &Settings, args: &PlannerArgs, categories: &[String]) -> Result<Arc<dyn toolgraph_engine::plan::Planner>> {
    models_of(s, args, categories)?.planner(&args.planner, if args.planner == "llm" { args.llm_model.as_deref().filter(|_| args.llm_url.is_none()) } else { None }).map_err(|e| anyhow::anyhow!(e))
}

/// The daemon over the configured stores (what `serve` and `mcp` run).
async fn build_daemon(s: &Settings, rewrites: &[String], planner: &PlannerArgs, keys: toolgraph_server::daemon::limits::ApiKeys) -> Result<(Arc<toolgraph_server::daemon::Daemon>, Arc<toolgraph_server::state::StateStore>)> {
    use toolgraph_server::daemon::{Backends, Daemon};
    let ip: std::net::IpAddr = s.server.host.parse().with_context(|| format!("server.host `{}` is not an IP address", s.server.host))?;
    let graph = open_store(s).await?;
    graph.setup().await?;
    let vectors = store::open_vectors(&s.vectors)?;
    let embedder = load_embedder(s).await?;
    let memory = Arc::new(toolgraph_engine::run::memory::Memory::open(vectors.clone(), embedder.dim()).await?);
    let cache = if s.embed.cache.is_empty() { None } else { Some(toolgraph_engine::retrieval::cache::EmbeddingCache::open(Path::new(&s.embed.cache))?) };
    let rewrites = pairs(rewrites, "--rewrite")?.into_iter().map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect();
    let executor = toolgraph_engine::exec::Executor::new(exec_settings(s, rewrites))?;
    let categories: Vec<String> = graph.node_snapshot().await?.categories.values().map(|c| c.name.clone()).collect();
    let models = Arc::new(models_of(s, planner, &categories)?);
    let chosen = models.planner(&planner.planner, if planner.planner == "llm" { planner.llm_model.as_deref().filter(|_| planner.llm_url.is_none()) } else { None }).map_err(|e| anyhow::anyhow!(e))?;
    let state = Arc::new(toolgraph_server::state::StateStore::open(&s.state.url, s.state.max_connections).await.with_context(|| "opening the state store (state.url)")?.with_synchronous_runs(s.state.synchronous_runs));
    if keys.is_empty() && !state.has_keys().await.map_err(anyhow::Error::msg)? && !ip.is_loopback() && !s.server.allow_anonymous {
        bail!("no API keys (TOOLGRAPH_API_KEYS(_FILE), or users' keys from `toolgraph users add`) for a daemon listening on {ip}: add keys, listen on 127.0.0.1, or set server.allow_anonymous = true");
    }
    let backends = Backends { store: graph, vectors, embedder, memory, executor, planner: chosen, run: s.run.clone(), settings: s.clone(), cache, models: Some(models), state: Some(state.clone()) };
    // An empty index is fine for a daemon that will get tools registered; index what the graph holds.
    let b = &backends;
    toolgraph_engine::retrieval::index::index_graph(b.store.as_ref(), b.vectors.as_ref(), b.embedder.as_ref(), b.cache.as_ref(), s.retrieval.index_chunk, false, |_, _| {}).await?;
    Ok((Daemon::new(backends, keys).await?, state))
}

/// `toolgraph mcp`: the daemon's MCP server on stdin/stdout, for the local operator.
#[cfg(feature = "mcp")]
async fn mcp_stdio(cli: &Cli, args: &McpArgs) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    let (daemon, _) = build_daemon(&s, &args.rewrites, &args.planner, Default::default()).await?;
    eprintln!("toolgraph MCP server on stdio (graph: {}, vectors: {}, planner: {})", s.store.uri, s.vectors.uri, args.planner.planner);
    toolgraph_server::mcp_serve::serve_stdio(daemon).await.map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(cli: &Cli, args: &ServeArgs) -> Result<ExitCode> {
    use toolgraph_server::daemon::limits::ApiKeys;
    let mut s = load_settings(cli)?;
    if let Some(p) = args.port {
        s.server.port = p;
    }
    if let Some(h) = &args.host {
        s.server.host = h.clone();
    }
    let keys = ApiKeys::from_env().map_err(|e| anyhow::anyhow!(e))?;
    let ip: std::net::IpAddr = s.server.host.parse().with_context(|| format!("server.host `{}` is not an IP address", s.server.host))?;
    let (daemon, state) = build_daemon(&s, &args.rewrites, &args.planner, keys.clone()).await?;
    let listener = tokio::net::TcpListener::bind((ip, s.server.port)).await.with_context(|| format!("cannot listen on {ip}:{}", s.server.port))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "toolgraph daemon on http://{addr} (graph: {}, vectors: {}, state: {}, planner: {}, {} bootstrap API keys{})",
        s.store.uri,
        s.vectors.uri,
        state.backend(),
        args.planner.planner,
        keys.len(),
        if keys.is_empty() { ", anonymous" } else { "" }
    );
    toolgraph_server::daemon::serve(listener, daemon, shutdown_signal()).await?;
    eprintln!("toolgraph daemon stopped");
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM (what container runtimes send).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(t) => t,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn sandbox(args: &SandboxArgs) -> Result<ExitCode> {
    use toolgraph_server::sandbox::{Faults, Library, Sandbox};
    let specs = complexfuncbench::read_specs(&args.spec, 1 << 30)?;
    let mut recordings = Vec::new();
    for c in &args.chains {
        let chains = complexfuncbench::read_chains(c, 1 << 30)?;
        let (recs, errors) = toolgraph_ingest::eval_chains::recordings(&chains, &specs);
        for e in errors.iter().take(10) {
            eprintln!("skipped: {}: {e}", c.display());
        }
        recordings.extend(recs);
    }
    let lib = Library::new(recordings);
    let faults = Faults {
        latency_ms: args.latency_ms,
        timeout_rate: args.timeout_rate,
        hang_ms: args.hang_ms,
        server_error_rate: args.error_rate,
        throttle_rate: args.throttle_rate,
        retry_after_s: args.retry_after_s,
        garbage_rate: args.garbage_rate,
        seed: args.seed,
    };
    eprintln!("replay sandbox: {} recordings on {} routes, http://127.0.0.1:{}/HOST/PATH", lib.len(), lib.routes(), args.port);
    let sb = Sandbox::new(lib, faults);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await.with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
    toolgraph_server::sandbox::serve(listener, sb, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

async fn ingest(cli: &Cli, args: &IngestArgs) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    if args.toolbench.is_empty() && args.queries.is_empty() && args.tools.is_empty() && args.trajectories.is_empty() {
        bail!("nothing to ingest: give --toolbench, --queries, --tools and/or --trajectories");
    }
    for p in args.toolbench.iter().chain(&args.queries).chain(&args.tools).chain(&args.trajectories) {
        if !p.exists() {
            bail!("{} does not exist", p.display());
        }
    }
    let store = open_store(&s).await?;
    let inputs = Inputs {
        toolbench: args.toolbench.clone(),
        queries: args.queries.clone(),
        tools: args.tools.clone(),
        trajectories: args.trajectories.clone(),
        stop: Arc::new(AtomicBool::new(false)),
    };
    // Ctrl-C: stop reading, write and finish what was read. A second Ctrl-C quits at once, which
    // is safe too: every batch is written atomically and the next ingest completes the rest.
    let stop = inputs.stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: finishing what was read (Ctrl-C again to quit now)");
            stop.store(true, Ordering::Relaxed);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let progress: Arc<dyn Progress> = if std::io::stderr().is_terminal() {
        Arc::new(BarProgress::new())
    } else {
        Arc::new(LogProgress::new())
    };
    let report = toolgraph_ingest::ingest(store.clone(), inputs, &s, progress).await?;
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    let t = &report.tally;
    eprintln!(
        "ingested into {}: {} runs read, {} kept, {} already ingested, {} dropped {:?}; calls kept {}, dropped {:?}; \
         graph: {} APIs, {} tools, {} categories, {} NEXT, {} FEEDS; {} record errors; {:.2}s ({:.0} runs/s)",
        report.store,
        t.runs_read,
        t.runs_kept,
        t.runs_already_ingested,
        t.runs_dropped_total(),
        t.runs_dropped,
        t.calls_kept,
        t.calls_dropped,
        report.nodes.apis,
        report.nodes.tools,
        report.nodes.categories,
        report.edges.next,
        report.edges.feeds,
        report.errors_total,
        report.elapsed_s,
        report.runs_per_s
    );
    if report.interrupted {
        eprintln!("stopped early: run the same ingest again to read the rest");
        return Ok(ExitCode::from(130));
    }
    // Fail loudly when the inputs gave nothing at all.
    if report.nodes.apis == 0 {
        eprintln!("error: the graph is empty after this ingest");
        return Ok(ExitCode::from(2));
    }
    if !args.no_index {
        index(&s, store.as_ref(), false)
            .await
            .context("the graph is ingested, but indexing its APIs failed (fix it, then run `toolgraph index`)")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(v)?).with_context(|| format!("writing {}", path.display()))
}

async fn graph(cli: &Cli, cmd: &GraphCmd) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    let store = open_store(&s).await?;
    match cmd {
        GraphCmd::Stats => println!("{}", serde_json::to_string_pretty(&store.stats().await?)?),
        GraphCmd::Neighbors { id, k } => {
            let succ = store.successors(id, *k).await?;
            if succ.is_empty() {
                eprintln!("{id} has no successors (is the id right? ids look like category/tool/api)");
            }
            println!("{}", serde_json::to_string_pretty(&succ)?);
        }
        GraphCmd::Cypher { query, params } => {
            let mut map = serde_json::Map::new();
            for p in params {
                let (k, v) = p.split_once('=').with_context(|| format!("--param {p}: expected NAME=JSON"))?;
                let value = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
                map.insert(k.to_string(), value);
            }
            let limits = CypherLimits { max_rows: s.store.query_max_rows, timeout_ms: s.store.query_timeout_ms };
            let rows = store.cypher_read(query, map, limits).await?;
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on a terminal.
struct BarProgress {
    bar: ProgressBar,
}

impl BarProgress {
    fn new() -> Self {
        BarProgress { bar: ProgressBar::hidden() }
    }
}

impl Progress for BarProgress {
    fn phase(&self, name: &str, total: Option<u64>) {
        self.bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        self.bar.reset();
        match total {
            Some(n) => {
                self.bar.set_length(n);
                self.bar.set_style(
                    ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
            }
            None => {
                self.bar.unset_length();
                self.bar.set_style(
                    ProgressStyle::with_template("{msg:>14} {spinner} {pos} records {per_sec}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
            }
        }
        self.bar.set_message(name.to_string());
    }
    fn advance(&self, n: u64) {
        self.bar.inc(n);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Periodic log lines when there is no terminal.
struct LogProgress {
    done: AtomicU64,
    state: Mutex<(String, Option<u64>, Instant)>,
}

impl LogProgress {
    fn new() -> Self {
        LogProgress { done: AtomicU64::new(0), state: Mutex::new((String::new(), None, Instant::now())) }
    }
}

impl Progress for LogProgress {
    fn phase(&self, name: &str, total: Option<u64>) {
        self.done.store(0, Ordering::Relaxed);
        if let Ok(mut s) = self.state.lock() {
            *s = (name.to_string(), total, Instant::now());
        }
    }
    fn advance(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Ok(mut s) = self.state.lock() {
            if s.2.elapsed() >= Duration::from_secs(5) {
                match s.1 {
                    Some(total) => tracing::info!("{}: {done}/{total}", s.0),
                    None => tracing::info!("{}: {done} records", s.0),
                }
                s.2 = Instant::now();
            }
        }
    }
    fn finish(&self) {}
}
