//! Adapters: one module per backend, each implementing the ports it serves.

pub mod cypher;
pub mod embedded;
pub mod fastembed;
pub mod falkordb;
pub mod neo4j;
pub mod qdrant_edge;
pub mod qdrant;
