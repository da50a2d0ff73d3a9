//! Building and inspecting the tool graph: `ingest`, `index`, `search`, `graph`, `convert`.

use super::support::{load_embedder, load_settings, open_store, write_json, Global};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::graph::CypherLimits;
use toolgraph_engine::stack::Stack;
use toolgraph_engine::vector::VectorStore;
use toolgraph_engine::{store, GraphStore};
use toolgraph_ingest::{complexfuncbench, Inputs, Progress};
use toolgraph_schema::Settings;

#[derive(Args)]
pub(super) struct IngestArgs {
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
pub(super) enum GraphCmd {
    /// Node and edge counts.
    Stats,
    /// Top-k successors of an API (or START) by blended weight.
    Neighbors {
        id: String,
        #[arg(short, default_value_t = 5)]
        k: usize,
    },
    /// What the argument filler learned for an API's parameters from the long-term memory's
    /// recorded runs: the kinds of request mention each took, the cue words for and against,
    /// the order of the mention taken, a constant, support counts.
    Args {
        /// The API's id (`category/tool/api`).
        id: String,
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
pub(super) enum ConvertCmd {
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

/// Embed the graph's APIs into the vector store; prints what changed.
pub(super) async fn index(s: &Settings, graph: &dyn GraphStore, rebuild: bool) -> Result<()> {
    let embedder = load_embedder(s).await?;
    let vectors = store::open_vectors(&s.vectors)?;
    index_into(s, graph, &vectors, &embedder, rebuild).await
}

/// [`index`] into `vectors` opened already, the APIs embedded by `embedder`.
async fn index_into(
    s: &Settings,
    graph: &dyn GraphStore,
    vectors: &Arc<dyn VectorStore>,
    embedder: &Arc<dyn Embedder>,
    rebuild: bool,
) -> Result<()> {
    let cache = if s.embed.cache.is_empty() {
        None
    } else {
        Some(toolgraph_engine::retrieval::cache::EmbeddingCache::open(Path::new(&s.embed.cache))?)
    };
    let bar = if std::io::stderr().is_terminal() { ProgressBar::new(0) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
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

pub(super) async fn ingest(cli: &Global, args: &IngestArgs) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    if args.toolbench.is_empty() && args.queries.is_empty() && args.tools.is_empty() && args.trajectories.is_empty() {
        bail!("nothing to ingest: give --toolbench, --queries, --tools and/or --trajectories");
    }
    for p in args.toolbench.iter().chain(&args.queries).chain(&args.tools).chain(&args.trajectories) {
        if !p.exists() {
            bail!("{} does not exist", p.display());
        }
    }
    // Everything an ingest teaches: the graph (its store), the long-term memory and the usage
    // vectors (the vector store, requests embedded by the configured model).
    let store = open_store(&s).await?;
    let vectors = store::open_vectors(&s.vectors).with_context(|| format!("opening vectors {}", s.vectors.uri))?;
    // Trajectories teach the memory and the usage vectors, which need the embedding model: without
    // it nothing is ingested (a re-run would skip the runs the graph holds, never remembering
    // them). Tool docs alone teach no run: their graph is kept if only the indexing fails.
    let teaches = !args.toolbench.is_empty() || !args.trajectories.is_empty();
    let embedder = match load_embedder(&s).await {
        Ok(e) => Some(e),
        Err(e) if teaches => {
            return Err(e.context(
                "the trajectories teach the long-term memory and the usage vectors, which need the embedding model; nothing was ingested",
            ))
        }
        Err(_) => None,
    };
    let inputs = Inputs {
        toolbench: args.toolbench.clone(),
        queries: args.queries.clone(),
        tools: args.tools.clone(),
        trajectories: args.trajectories.clone(),
        stop: Arc::new(AtomicBool::new(false)),
        // The argument model, the memory and the usage vectors learn from every new answered
        // run (`toolgraph_engine::ingest`).
        learner: None,
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
    let progress: Arc<dyn Progress> =
        if std::io::stderr().is_terminal() { Arc::new(BarProgress::new()) } else { Arc::new(LogProgress::new()) };
    let report = match &embedder {
        Some(embedder) => {
            let executor =
                toolgraph_engine::exec::Executor::new(toolgraph_engine::stack::exec_settings(&s, Vec::new()))?;
            let stack = Stack::over(s.clone(), store.clone(), vectors.clone(), embedder.clone(), executor).await?;
            toolgraph_engine::ingest::ingest(&stack, inputs, progress).await?
        }
        // Docs only: no run to learn from.
        None => toolgraph_ingest::ingest(store.clone(), inputs, &s, progress).await?,
    };
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    let t = &report.tally;
    eprintln!(
        "ingested into {}: {} runs read, {} kept, {} already ingested, {} dropped {:?}; calls kept {}, dropped {:?}; \
         graph: {} APIs, {} tools, {} categories, {} NEXT, {} FEEDS; argument model: {} runs learned; memory: {} runs remembered; {} record errors; {:.2}s ({:.0} runs/s)",
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
        report.arg_examples,
        report.memories,
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
        let indexed = match &embedder {
            Some(embedder) => index_into(&s, store.as_ref(), &vectors, embedder, false).await,
            None => index(&s, store.as_ref(), false).await,
        };
        indexed.context("the graph is ingested, but indexing its APIs failed (fix it, then run `toolgraph index`)")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn graph(cli: &Global, cmd: &GraphCmd) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    if let GraphCmd::Args { id } = cmd {
        let stack = toolgraph_engine::stack::Stack::open(s.clone(), &Default::default(), Vec::new())
            .await
            .with_context(|| format!("opening the stores (graph {}, vectors {})", s.store.uri, s.vectors.uri))?;
        let engine = stack.engine().await?;
        if !engine.graph().apis.contains_key(id) {
            bail!("no API {id} in the graph (ids look like category/tool/api)");
        }
        let model = engine.arg_model().await?.unwrap_or_default();
        let learned = model.describe(id);
        if learned.is_null() {
            eprintln!("nothing learned for {id}: no ingested or remembered run calls it with literal arguments ({} runs learned from)", model.examples);
        }
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"api": id, "examples": model.examples, "parameters": learned})
            )?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let store = open_store(&s).await?;
    match cmd {
        GraphCmd::Args { .. } => unreachable!("handled above"),
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
            let limits = CypherLimits::of(&s.store);
            let rows = store.cypher_read(query, map, limits).await?;
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on a terminal.
pub(super) struct BarProgress {
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
pub(super) struct LogProgress {
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

#[derive(Args)]
pub(super) struct SearchArgs {
    /// The request text.
    pub(super) query: String,
    #[arg(short, default_value_t = 10)]
    pub(super) k: usize,
    /// Only APIs of this category (name or slug).
    #[arg(long)]
    pub(super) category: Option<String>,
    /// Only APIs of this tool (name or slug).
    #[arg(long)]
    pub(super) tool: Option<String>,
    /// bm25, dense or hybrid.
    #[arg(long, default_value = "hybrid")]
    pub(super) method: toolgraph_engine::retrieval::hybrid::Method,
    /// Re-rank with the graph prior (availability; co-usage with --after APIs).
    #[arg(long)]
    pub(super) graph_prior: bool,
    /// APIs already chosen (ids); their successors get the co-usage prior.
    #[arg(long, num_args = 1.., value_name = "API_ID")]
    pub(super) after: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(super) json: bool,
}

/// `toolgraph search`: rank APIs for a request.
pub(super) async fn search(cli: &Global, a: &SearchArgs) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    let vectors = store::open_vectors(&s.vectors)?;
    let embedder = load_embedder(&s).await?;
    let retriever = toolgraph_engine::retrieval::hybrid::Retriever::load(vectors, embedder, None, s.retrieval.clone())
        .await
        .context("loading the API index (run `toolgraph ingest` or `toolgraph index` first)")?;
    let prior = if a.graph_prior || !a.after.is_empty() {
        let graph = open_store(&s).await?;
        let snap = graph.snapshot().await?;
        Some(toolgraph_engine::retrieval::hybrid::GraphPrior::from_snapshot(&snap, &a.after))
    } else {
        None
    };
    let filter =
        toolgraph_engine::retrieval::Filter { category: a.category.clone(), tool: a.tool.clone(), status: None };
    let hits = retriever.search(&a.query, a.k, &filter, a.method, prior.as_ref()).await?;
    // Written without println!, so a closed pipe (`| head`) ends quietly.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&hits)?)
    } else {
        let mut r = writeln!(out, "{:>4}  {:>6}  {:<60}  {:<30}  category", "rank", "score", "api", "tool");
        for (i, h) in hits.iter().enumerate() {
            r = r.and_then(|_| {
                writeln!(out, "{:>4}  {:>6.3}  {:<60}  {:<30}  {}", i + 1, h.score, h.id, h.tool, h.category)
            });
        }
        r
    };
    if hits.is_empty() {
        eprintln!("no APIs matched (index holds {} APIs)", retriever.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// `toolgraph convert`: other formats into toolgraph's JSONL runs.
pub(super) fn convert(cmd: &ConvertCmd) -> Result<ExitCode> {
    let ConvertCmd::Complexfuncbench { data, spec, out, tools_out, category } = cmd;
    let c = complexfuncbench::convert(data, spec, out, tools_out, category)?;
    for e in &c.errors {
        eprintln!("skipped: {e}");
    }
    println!("{}", serde_json::to_string_pretty(&c)?);
    Ok(if c.runs == 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
