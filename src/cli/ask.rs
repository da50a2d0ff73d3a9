//! `toolgraph ask`: plan and execute one request from the command line.

use super::support::{load_settings, mode_parser, pairs, rewrites_of, Global, PlannerArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::process::ExitCode;
use toolgraph_schema::{Mode, Settings};

#[derive(Args)]
pub(super) struct AskArgs {
    /// The request.
    request: String,
    #[command(flatten)]
    planner: PlannerArgs,
    /// graph, plan, dfs-no-graph or retrieve-greedy (default: run.mode of the config, graph).
    #[arg(long, value_parser = mode_parser())]
    mode: Option<Mode>,
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
    /// Plan only: print the chain the engine would run, its data flow as `$varN.field$`
    /// references; nothing is sent, learned or remembered.
    #[arg(long)]
    dry_run: bool,
    /// Print the whole run report (trace included) as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) async fn ask(cli: &Global, args: &AskArgs) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    let run_settings = toolgraph_engine::run::RunSettings {
        mode: args.mode.unwrap_or(s.run.mode),
        backward: s.run.backward || args.backward,
        learn: s.run.learn && !args.no_learn,
        remember: s.run.remember && !args.no_learn,
        ..s.run.clone()
    };
    let stack = toolgraph_engine::stack::Stack::open(s.clone(), &args.planner.choice(), rewrites_of(&args.rewrites)?)
        .await
        .with_context(|| format!("opening the stores (graph {}, vectors {})", s.store.uri, s.vectors.uri))?;
    let engine = stack
        .engine_with(stack.embedder.clone(), run_settings, None)
        .await
        .context("loading the graph and the API index (run `toolgraph ingest` or `toolgraph index` first)")?;
    if engine.graph().apis.is_empty() {
        bail!("the graph holds no APIs: run `toolgraph ingest` first");
    }
    mcp_remote(&s, engine.graph(), &stack.executor).await?;
    let given: serde_json::Map<String, serde_json::Value> = pairs(&args.given, "--given")?.into_iter().collect();
    let opts = toolgraph_engine::run::RunOptions { dry_run: args.dry_run, ..Default::default() };
    let r = engine.run_with(&args.request, given, Vec::new(), None, opts).await?;
    // The graph learns from this run too (counts; the chain when answered), once per run id.
    let run_id = format!(
        "cli_{}_{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default()
    );
    if let Err(e) = engine.learn_from(&run_id, &r).await {
        tracing::warn!(error = %e, "learning from the run failed");
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&r)?);
    } else {
        let _ = writeln!(
            out,
            "status: {}{}",
            r.status.as_str(),
            if r.stats.dry_run { " (planned only: nothing was sent)" } else { "" }
        );
        for c in &r.chain {
            let _ = writeln!(out, "  {} = {}({})", c.label, c.name, serde_json::Value::Object(c.arguments.clone()));
        }
        let _ = writeln!(out, "answer: {}", r.answer);
        // Where the chain came from: a remembered request (an ingested trajectory or an earlier
        // answered run) replayed by analogy.
        use toolgraph_engine::run::TraceEvent;
        let failed = r.trace.iter().find_map(|e| match e {
            TraceEvent::RecallFailed { reason } => Some(reason.as_str()),
            _ => None,
        });
        for e in &r.trace {
            if let TraceEvent::Recall { request, score, replayed: true, left_out, .. } = e {
                match failed {
                    None => {
                        let _ = writeln!(out, "recalled (similarity {score:.2}) and replayed: \"{request}\"");
                    }
                    Some(why) => {
                        let _ = writeln!(
                            out,
                            "recalled (similarity {score:.2}): \"{request}\"; its replay failed ({why}), the search went on"
                        );
                    }
                }
                // The remembered calls the replay left out (what only the remembered request asked
                // for), after it.
                if !left_out.is_empty() {
                    let names: Vec<&str> = left_out.iter().map(|a| a.rsplit('/').next().unwrap_or(a)).collect();
                    let _ = writeln!(
                        out,
                        "left out of the replay: its calls of {} (what only the remembered request asked for)",
                        names.join(", ")
                    );
                }
            }
        }
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
pub(super) async fn mcp_remote(
    s: &Settings,
    graph: &toolgraph_schema::GraphSnapshot,
    exec: &toolgraph_engine::exec::Executor,
) -> Result<()> {
    if !graph.apis.values().any(|a| a.url.starts_with(toolgraph_engine::exec::MCP_SCHEME)) {
        return Ok(());
    }
    let state = toolgraph_server::state::StateStore::open(&s.state.url, s.state.max_connections)
        .await
        .with_context(|| "opening the state store (state.url) for its MCP servers")?;
    let hub =
        toolgraph_server::mcp::McpHub::from_state(&state, Some(exec.clone())).await.map_err(anyhow::Error::msg)?;
    exec.set_remote(hub);
    Ok(())
}

#[cfg(not(feature = "mcp"))]
pub(super) async fn mcp_remote(
    _s: &Settings,
    _graph: &toolgraph_schema::GraphSnapshot,
    _exec: &toolgraph_engine::exec::Executor,
) -> Result<()> {
    Ok(())
}
