//! `toolgraph tools`: tool sources beyond trajectories and docs (MCP servers).

use super::support::{load_settings, open_store, Global};
use anyhow::{Context, Result};
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub(super) enum ToolsCmd {
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

#[cfg(feature = "mcp")]
pub(super) async fn tools(cli: &Global, cmd: &ToolsCmd) -> Result<ExitCode> {
    use toolgraph_server::mcp::{import, McpHub, McpServer};
    let s = load_settings(cli)?;
    let state = toolgraph_server::state::StateStore::open(&s.state.url, s.state.max_connections)
        .await
        .with_context(|| "opening the state store (state.url)")?;
    match cmd {
        ToolsCmd::AddMcp { name, command, url } => {
            let def = McpServer { name: name.clone(), command: command.clone(), url: url.clone() };
            def.check().map_err(|e| anyhow::anyhow!("--name/--command/--url: {e}"))?;
            let graph = open_store(&s).await?;
            graph.setup().await?;
            let exec = toolgraph_engine::exec::Executor::new(toolgraph_engine::stack::exec_settings(&s, Vec::new()))?;
            let hub = McpHub::new(vec![def.clone()], Some(exec));
            let imported =
                import(&hub, name, graph.as_ref()).await.map_err(|e| anyhow::anyhow!("MCP server `{name}`: {e}"))?;
            state.put_mcp_server(&def, "cli").await.map_err(anyhow::Error::msg)?;
            super::graph::index(&s, graph.as_ref(), false).await?;
            println!(
                "MCP server {name}: {} tools imported{}",
                imported.admitted.len(),
                if imported.invalidated.is_empty() {
                    String::new()
                } else {
                    format!(", {} no longer listed (invalidated)", imported.invalidated.len())
                }
            );
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
pub(super) async fn tools(_cli: &Global, _cmd: &ToolsCmd) -> Result<ExitCode> {
    bail!("this toolgraph was built without the `mcp` feature")
}
