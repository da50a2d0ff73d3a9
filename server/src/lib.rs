#![recursion_limit = "512"]
//! toolgraph's HTTP surfaces. The engine stays free of any server framework; this crate holds the
//! replay sandbox (recorded tool responses, fault injection) and the daemon (`toolgraph serve`).

pub mod daemon;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "mcp")]
pub mod mcp_serve;
pub mod sandbox;
pub mod state;
pub mod telemetry;
