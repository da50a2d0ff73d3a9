#![recursion_limit = "256"]
//! toolgraph's engine: ports (traits) and the adapters that implement them.
//!
//! Invariants: ports never expose backend types (neo4rs, falkordb, redb); the engine never imports
//! an HTTP server framework; every backend gets its weights from [`graph::weights`], so all stores
//! hold the same numbers for the same input.

pub mod adapters;
pub mod embed;
pub mod error;
pub mod exec;
pub mod graph;
pub mod plan;
pub mod retrieval;
pub mod run;
pub mod settings;
pub mod store;
pub mod vector;

pub use error::{EngineError, ErrorClass, Result};
pub use graph::GraphStore;
