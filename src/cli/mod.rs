use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
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
use toolgraph_schema::{Mode, PlannerKind, Settings};

mod ask;
mod eval;
mod graph;
mod serve;
mod tools;

use ask::AskArgs;
use eval::EvalCmd;
use graph::{ConvertCmd, GraphCmd, IngestArgs};
#[cfg(feature = "mcp")]
use serve::McpArgs;
use serve::{SandboxArgs, ServeArgs};
use tools::ToolsCmd;

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
    Search(graph::SearchArgs),
}

/// Who decides in `ask` and `serve`.
#[derive(Args, Clone)]
struct PlannerArgs {
    /// Who decides: the deterministic planner (default) or an OpenAI-compatible LLM.
    #[arg(long, default_value = "deterministic", value_parser = PossibleValuesParser::new(PlannerKind::names()).try_map(|p| p.parse::<PlannerKind>()))]
    planner: PlannerKind,
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
    Ok(toolgraph_engine::stack::load_embedder(&s.embed).await?)
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Ingest(args) => graph::ingest(&cli, args).await,
        Command::Graph(cmd) => graph::graph(&cli, cmd).await,
        Command::Index { rebuild } => {
            let s = load_settings(&cli)?;
            let store = open_store(&s).await?;
            graph::index(&s, store.as_ref(), *rebuild).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Search(args) => graph::search(&cli, args).await,
        Command::Eval(cmd) => eval::run(&cli, cmd).await,
        Command::Ask(args) => ask::ask(&cli, args).await,
        Command::Sandbox(args) => serve::sandbox(args).await,
        Command::Serve(args) => serve::serve(&cli, args).await,
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => serve::mcp_stdio(&cli, args).await,
        Command::Users(cmd) => {
            let s = load_settings(&cli)?;
            crate::users::run(&s.state.url, s.state.max_connections, cmd).await
        }
        Command::Tools(cmd) => tools::tools(&cli, cmd).await,
        Command::Convert(cmd) => graph::convert(cmd),
    }
}

/// Parses `--mode`: one of [`Mode::names`] (clap lists them in the help and in its error).
fn mode_parser() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(Mode::names()).try_map(|m| m.parse::<Mode>())
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

/// Execution settings from the config, with `--rewrite` targets on this machine allow-listed (the
/// user pointed the calls there, e.g. at the replay sandbox).
impl PlannerArgs {
    /// The planner these flags choose.
    fn choice(&self) -> toolgraph_engine::stack::PlannerChoice {
        toolgraph_engine::stack::PlannerChoice {
            kind: self.planner,
            model: self.llm_model.clone(),
            url: self.llm_url.clone(),
            endpoint_model: self.llm_endpoint_model.clone(),
        }
    }
}

/// `--rewrite FROM=TO` pairs.
fn rewrites_of(items: &[String]) -> Result<Vec<(String, String)>> {
    Ok(pairs(items, "--rewrite")?
        .into_iter()
        .map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
        .collect())
}

fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(v)?).with_context(|| format!("writing {}", path.display()))
}
