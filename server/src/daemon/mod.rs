//! The daemon (`toolgraph serve`): orchestration over HTTP, streamed as Server-Sent Events on
//! request, conversational sessions, past runs, tool search / registration / invalidation /
//! OpenAPI import, read-only Cypher, health, readiness, Prometheus metrics and its own OpenAPI
//! document.
//!
//! Limits: API keys (digests only) and per-key token buckets on `/v1/*`; body size, request text
//! length and a time limit on every request; at most `server.max_in_flight` runs at once (503 +
//! Retry-After beyond); graceful shutdown stops accepting, answers `/readyz` with 503 and lets
//! in-flight runs finish within `server.shutdown_grace_s`. Tool responses are data: they reach
//! the planner only as observations and argument values, never as instructions, and the trace
//! never holds a key (keys are not part of runs at all).

mod accounts;
pub use accounts::MAX_KEY_DAYS;
mod app;
mod approvals;
mod auth;
mod client;
pub mod console;
mod cypher;
pub mod error;
mod history;
pub mod limits;
mod listen;
#[cfg(feature = "mcp")]
pub mod mcp_serve;
mod mcp_servers;
#[cfg(feature = "mcp")]
mod mcp_sessions;
#[cfg(feature = "mcp")]
mod mcp_tools;
pub mod metrics;
mod openapi;
mod openapi_import;
mod ops;
mod pause;
mod routes;
mod runs;
mod sessions;
mod tools;
mod upkeep;
mod views;

mod shared;
pub use shared::Daemon;

pub use app::{router, serve, serve_operations};
pub use runs::OrchestrateRequest;
/// What the daemon runs on: the stores, the embedder, the executor and the planners.
pub use toolgraph_engine::stack::Stack;
pub use upkeep::Upkeep;
