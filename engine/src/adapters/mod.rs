//! Adapters: one module per backend, each implementing the ports it serves. The graph stores live in
//! the graph crate (re-exported here).

pub mod fastembed;
pub mod qdrant;
pub mod qdrant_edge;

pub use toolgraph_graph::adapters::{cypher, embedded, falkordb, neo4j};
