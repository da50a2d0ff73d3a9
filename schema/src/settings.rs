//! Configuration structs. Loading (defaults → file → `TOOLGRAPH__*` env → CLI) lives in the engine.
//! Secrets are never part of these structs: they come from the environment or a secret file.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub store: StoreSettings,
    pub weights: WeightSettings,
    pub ingest: IngestSettings,
    pub embed: EmbedSettings,
}

/// The sentence-embedding model (fastembed over ONNX Runtime, files on local disk).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbedSettings {
    /// Folder with model.onnx, tokenizer.json, config.json, special_tokens_map.json, tokenizer_config.json.
    pub model_dir: String,
    /// Path to libonnxruntime.so.
    pub ort_library: String,
    /// Texts per inference batch.
    pub batch_size: usize,
    /// ONNX Runtime intra-op threads.
    pub threads: usize,
    /// Longest input in tokens.
    pub max_length: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreSettings {
    /// `embedded:PATH`, `neo4j://HOST:PORT` or `falkordb://HOST:PORT`.
    pub uri: String,
    /// Graph name on FalkorDB.
    pub graph: String,
    /// Database name on Neo4j.
    pub neo4j_database: String,
    /// Neo4j user; the password comes from `TOOLGRAPH_NEO4J_PASSWORD` or the file named by
    /// `TOOLGRAPH_NEO4J_PASSWORD_FILE`.
    pub neo4j_user: String,
    /// Rows per write batch on the Cypher servers.
    pub batch_rows: usize,
    /// Time limit of one read-only Cypher query, milliseconds.
    pub query_timeout_ms: u64,
    /// Row limit of one read-only Cypher query.
    pub query_max_rows: usize,
}

/// Dynamic-weight parameters (thesis §3.5.2): f(x) = αx+1 for x ≥ 0, e^{αx} for x < 0;
/// w = β·w0 + (1-β)·f(s_j)/Σ f(s_k).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WeightSettings {
    pub alpha: f64,
    pub beta: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestSettings {
    /// Trajectories per store write batch.
    pub batch_size: usize,
    /// Largest record (a JSONL line or a whole JSON file) accepted, bytes.
    pub max_record_bytes: u64,
    /// Errors kept in the report (all are counted).
    pub max_reported_errors: usize,
}
