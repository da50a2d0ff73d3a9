//! Configuration structs. Loading (defaults → file → `TOOLGRAPH__*` env → CLI) lives in the engine.
//! Secrets are never part of these structs: they come from the environment or a secret file.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub store: StoreSettings,
    pub weights: WeightSettings,
    pub ingest: IngestSettings,
    pub embed: EmbedSettings,
    pub vectors: VectorSettings,
    pub retrieval: RetrievalSettings,
}

/// Where API vectors and long-term memories live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorSettings {
    /// `embedded:FOLDER` (Qdrant's in-process engine) or `qdrant:http://HOST:6334` (a Qdrant
    /// server over gRPC; the API key comes from `TOOLGRAPH_QDRANT_API_KEY` or the file named by
    /// `TOOLGRAPH_QDRANT_API_KEY_FILE`).
    pub uri: String,
    /// Collection names on a Qdrant server are `PREFIX_apis`, `PREFIX_memory`.
    pub collection_prefix: String,
    /// HNSW beam width at search time (recall against exact search rises with it).
    pub hnsw_ef: usize,
    /// Time limit of one request to a Qdrant server, milliseconds.
    pub timeout_ms: u64,
}

/// Seed-tool retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievalSettings {
    /// Candidates each of the lexical and dense lists contributes before fusion.
    pub candidates: usize,
    /// Share of the (max-normalized) BM25 score in the fused score; the rest is dense.
    pub lexical_weight: f32,
    /// Strength of the graph prior (availability and co-usage with chosen tools); 0 turns it off.
    pub graph_prior: f32,
    /// Texts per embedding-and-write chunk while indexing.
    pub index_chunk: usize,
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
    /// Embedding cache (redb) keyed by model and text; empty turns it off.
    pub cache: String,
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
