#![recursion_limit = "512"]
//! toolgraph's daemon (`toolgraph serve`): HTTP API, console, accounts and durable state, MCP both
//! ways, telemetry. The engine stays free of any server framework; the replay sandbox is a crate of
//! its own (`toolgraph-sandbox`).

pub mod daemon;
#[cfg(feature = "mcp")]
pub mod mcp;
/// toolgraph as an MCP server (`toolgraph mcp`, `/mcp`): the daemon's own module, named here too.
#[cfg(feature = "mcp")]
pub use daemon::mcp_serve;
pub mod state;
pub mod telemetry;
