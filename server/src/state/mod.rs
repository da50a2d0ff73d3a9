//! The daemon's durable state (the `StateStore` port): users and their API keys (digests only),
//! conversational sessions, runs (request, owner, status, chain, trace, answer, timings), saved
//! chains, tool credentials (sealed, or referenced by environment variable / file), approvals and
//! an audit log.
//!
//! One code path, two adapters: sqlx's `Any` driver over **SQLite** (the embedded default, a file
//! under `.tgdata/`) or **PostgreSQL** (production: several daemon replicas share it). The schema is
//! portable migrations (`server/migrations/`), applied in order at open under sqlx's migration lock,
//! so replicas starting together migrate once. One file per group of tables. Every statement uses `$N` parameters (both drivers take
//! them); times are milliseconds since the epoch, JSON documents are text.

mod approvals;
mod audit;
mod chains;
mod credentials;
mod mcp_servers;
mod runs;
pub mod secrets;
mod sessions;
mod users;

mod store;
pub use store::{hex, key_digest, now_ms, random_id, Result, StateError, StateStore};

pub use audit::{AuditEntry, Pruned};
pub use chains::SavedChain;
pub use credentials::CredentialRow;
pub use mcp_servers::McpServer;
pub use runs::{RunFilter, RunRecord, RunSummary};
pub use users::{Caller, KeyInfo, Login, Role, User};
