use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod ask;
mod eval;
mod graph;
mod serve;
mod support;
mod tools;

use ask::AskArgs;
use eval::EvalCmd;
use graph::{ConvertCmd, GraphCmd, IngestArgs};
#[cfg(feature = "mcp")]
use serve::McpArgs;
use serve::{SandboxArgs, ServeArgs};
use support::{load_settings, open_store, Global};
use tools::ToolsCmd;

#[derive(Parser)]
#[command(name = "toolgraph", version, about = "Learn how API tools are used together; plan and run tool chains")]
struct Cli {
    #[command(flatten)]
    global: Global,
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

async fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Ingest(args) => graph::ingest(&cli.global, args).await,
        Command::Graph(cmd) => graph::graph(&cli.global, cmd).await,
        Command::Index { rebuild } => {
            let s = load_settings(&cli.global)?;
            let store = open_store(&s).await?;
            graph::index(&s, store.as_ref(), *rebuild).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Search(args) => graph::search(&cli.global, args).await,
        Command::Eval(cmd) => eval::run(&cli.global, cmd).await,
        Command::Ask(args) => ask::ask(&cli.global, args).await,
        Command::Sandbox(args) => serve::sandbox(args).await,
        Command::Serve(args) => serve::serve(&cli.global, args).await,
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => serve::mcp_stdio(&cli.global, args).await,
        Command::Users(cmd) => {
            let s = load_settings(&cli.global)?;
            crate::users::run(&s.state.url, s.state.max_connections, cmd).await
        }
        Command::Tools(cmd) => tools::tools(&cli.global, cmd).await,
        Command::Convert(cmd) => graph::convert(cmd),
    }
}
