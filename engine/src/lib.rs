#![recursion_limit = "256"]
// Every public item is documented and nothing is `pub` that the crate does not export (the test
// command denies warnings).
#![warn(unreachable_pub, missing_docs)]
//! toolgraph's engine: ports (traits) and the adapters that implement them.
//!
//! Invariants: ports never expose backend types (neo4rs, falkordb, redb, qdrant); the engine never
//! imports an HTTP server framework. The graph port, its weights and stores are the graph crate's
//! ([`graph`], re-exported), so what needs only the graph (ingest) does not compile the engine.

pub mod adapters;
pub mod clock;
pub mod embed;
pub mod exec;
pub mod fill;
pub mod ingest;
pub mod memory;
pub mod plan;
pub mod read;
pub mod retrieval;
pub mod run;
pub mod settings;
pub mod stack;
pub mod store;
pub mod vector;

pub use graph::GraphStore;
pub use toolgraph_graph as graph;
pub use toolgraph_graph::error;
pub use toolgraph_graph::{EngineError, ErrorClass, Result};
