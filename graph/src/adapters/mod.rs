//! The graph stores: one module per backend, each implementing [`GraphStore`](crate::GraphStore).

pub mod cypher;
pub mod embedded;
pub mod falkordb;
mod falkordb_gate;
mod falkordb_query;
pub mod neo4j;
mod statements;
