//! The graph stores: one module per backend, each implementing [`GraphStore`](crate::GraphStore).

pub mod cypher;
pub mod embedded;
pub mod falkordb;
pub mod neo4j;
