//! `toolgraph serve` (the daemon), `toolgraph mcp` (MCP over stdio) and `toolgraph sandbox` (the replay sandbox).

use super::support::{load_settings, rewrites_of, Global, PlannerArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use toolgraph_ingest::complexfuncbench;
use toolgraph_schema::Settings;

#[derive(Args)]
pub(super) struct ServeArgs {
    /// Port (overrides server.port).
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on (overrides server.host). Without API keys only loopback is allowed
    /// unless server.allow_anonymous is set.
    #[arg(long)]
    host: Option<String>,
    /// Serve /healthz, /readyz and /metrics on this port too, on limits of their own (overrides
    /// server.ops_port; 0: any free port).
    #[arg(long)]
    ops_port: Option<u16>,
    /// Rewrite tool URLs: FROM=TO (e.g. https://=http://127.0.0.1:8765/ for the replay sandbox).
    #[arg(long = "rewrite", value_name = "FROM=TO")]
    rewrites: Vec<String>,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[cfg(feature = "mcp")]
#[derive(Args)]
pub(super) struct McpArgs {
    /// Rewrite tool URLs: FROM=TO (e.g. https://=http://127.0.0.1:8765/ for the replay sandbox).
    #[arg(long = "rewrite", value_name = "FROM=TO")]
    rewrites: Vec<String>,
    #[command(flatten)]
    planner: PlannerArgs,
}

#[derive(Args)]
pub(super) struct SandboxArgs {
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

/// The daemon over the configured stores (what `serve` and `mcp` run).
pub(super) async fn build_daemon(
    s: &Settings,
    rewrites: &[String],
    planner: &PlannerArgs,
    keys: toolgraph_server::daemon::limits::ApiKeys,
) -> Result<(Arc<toolgraph_server::daemon::Daemon>, Arc<toolgraph_server::state::StateStore>)> {
    use toolgraph_server::daemon::Daemon;
    let ip: std::net::IpAddr =
        s.server.host.parse().with_context(|| format!("server.host `{}` is not an IP address", s.server.host))?;
    let stack = toolgraph_engine::stack::Stack::open(s.clone(), &planner.choice(), rewrites_of(rewrites)?)
        .await
        .with_context(|| format!("opening the stores (graph {}, vectors {})", s.store.uri, s.vectors.uri))?;
    let state = Arc::new(
        toolgraph_server::state::StateStore::open(&s.state.url, s.state.max_connections)
            .await
            .with_context(|| "opening the state store (state.url)")?
            .with_synchronous_runs(s.state.synchronous_runs),
    );
    if keys.is_empty()
        && !state.has_keys().await.map_err(anyhow::Error::msg)?
        && !ip.is_loopback()
        && !s.server.allow_anonymous
    {
        bail!("no API keys (TOOLGRAPH_API_KEYS(_FILE), or users' keys from `toolgraph users add`) for a daemon listening on {ip}: add keys, listen on 127.0.0.1, or set server.allow_anonymous = true");
    }
    // An empty index is fine for a daemon that will get tools registered; index what the graph holds.
    stack.index(false).await?;
    Ok((Daemon::new(stack, Some(state.clone()), keys).await?, state))
}

/// `toolgraph mcp`: the daemon's MCP server on stdin/stdout, for the local operator.
#[cfg(feature = "mcp")]
pub(super) async fn mcp_stdio(cli: &Global, args: &McpArgs) -> Result<ExitCode> {
    let s = load_settings(cli)?;
    let (daemon, _) = build_daemon(&s, &args.rewrites, &args.planner, Default::default()).await?;
    eprintln!(
        "toolgraph MCP server on stdio (graph: {}, vectors: {}, planner: {})",
        s.store.uri,
        s.vectors.uri,
        args.planner.planner.name()
    );
    toolgraph_server::mcp_serve::serve_stdio(daemon).await.map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn serve(cli: &Global, args: &ServeArgs) -> Result<ExitCode> {
    use toolgraph_server::daemon::limits::ApiKeys;
    let mut s = load_settings(cli)?;
    if let Some(p) = args.port {
        s.server.port = p;
    }
    if let Some(h) = &args.host {
        s.server.host = h.clone();
    }
    let keys = ApiKeys::from_env().map_err(|e| anyhow::anyhow!(e))?;
    let ip: std::net::IpAddr =
        s.server.host.parse().with_context(|| format!("server.host `{}` is not an IP address", s.server.host))?;
    let (daemon, state) = build_daemon(&s, &args.rewrites, &args.planner, keys.clone()).await?;
    let listener = tokio::net::TcpListener::bind((ip, s.server.port))
        .await
        .with_context(|| format!("cannot listen on {ip}:{}", s.server.port))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "toolgraph daemon on http://{addr} (graph: {}, vectors: {}, state: {}, planner: {}, {} bootstrap API keys{})",
        s.store.uri,
        s.vectors.uri,
        state.backend(),
        args.planner.planner.name(),
        keys.len(),
        if keys.is_empty() { ", anonymous" } else { "" }
    );
    let ops_port = args.ops_port.or(s.server.ops_port);
    let operations = match ops_port {
        Some(port) => {
            let host = if s.server.ops_host.is_empty() { &s.server.host } else { &s.server.ops_host };
            let ip: std::net::IpAddr =
                host.parse().with_context(|| format!("server.ops_host `{host}` is not an IP address"))?;
            let ops = tokio::net::TcpListener::bind((ip, port))
                .await
                .with_context(|| format!("cannot listen on {ip}:{port} for operations"))?;
            eprintln!("toolgraph operations on http://{} (/healthz, /readyz, /metrics)", ops.local_addr()?);
            let served = toolgraph_server::daemon::serve_operations(ops, daemon.clone(), std::future::pending());
            Some(tokio::spawn(served))
        }
        None => None,
    };
    toolgraph_server::daemon::serve(listener, daemon, shutdown_signal()).await?;
    if let Some(ops) = operations {
        ops.abort();
    }
    eprintln!("toolgraph daemon stopped");
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM (what container runtimes send).
pub(super) async fn shutdown_signal() {
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

pub(super) async fn sandbox(args: &SandboxArgs) -> Result<ExitCode> {
    use toolgraph_sandbox::{Faults, Library, Sandbox};
    let specs = complexfuncbench::read_specs(&args.spec, 1 << 30)?;
    let mut recordings = Vec::new();
    // Each sample's own recordings, answered first once named (`POST /_sandbox/sample`), as
    // ComplexFuncBench's runner answers a sample's calls.
    let mut samples = Vec::new();
    for c in &args.chains {
        let chains = complexfuncbench::read_chains(c, 1 << 30)?;
        let (recs, errors) = toolgraph_eval::chains::recordings(&chains, &specs);
        for e in errors.iter().take(10) {
            eprintln!("skipped: {}: {e}", c.display());
        }
        recordings.extend(recs);
        for chain in &chains {
            samples
                .push((chain.input.clone(), toolgraph_eval::chains::recordings(std::slice::from_ref(chain), &specs).0));
        }
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
    let (recordings, routes) = (lib.len(), lib.routes());
    let sb = Sandbox::new(lib, faults);
    sb.set_samples(samples);
    // Bound first, then announced with the port it got (`--port 0` picks a free one).
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
    eprintln!(
        "replay sandbox: {recordings} recordings on {routes} routes, http://127.0.0.1:{}/HOST/PATH",
        listener.local_addr()?.port()
    );
    toolgraph_sandbox::serve(listener, sb, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}
