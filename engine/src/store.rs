//! Opening stores from their URIs: the graph store ([`toolgraph_graph::store`], re-exported) and
//! the vector store.

use crate::{EngineError, Result};
use std::sync::Arc;

pub use toolgraph_graph::store::{neo4j_password, open, StoreUri};

/// Open the vector store `settings.uri` names: `embedded:FOLDER` or `qdrant:http://HOST:6334`.
pub fn open_vectors(settings: &toolgraph_schema::VectorSettings) -> Result<Arc<dyn crate::vector::VectorStore>> {
    let uri = settings.uri.trim();
    if let Some(path) = uri.strip_prefix("embedded:") {
        if path.is_empty() {
            return Err(EngineError::Config("embedded vector store needs a folder: embedded:FOLDER".into()));
        }
        return Ok(Arc::new(crate::adapters::qdrant_edge::EdgeVectorStore::open(
            std::path::Path::new(path),
            settings.hnsw_ef,
        )?));
    }
    if let Some(url) = uri.strip_prefix("qdrant:") {
        if url.contains('@') || url.contains("api-key") || url.contains("api_key") {
            return Err(EngineError::Config(
                "put the Qdrant API key in TOOLGRAPH_QDRANT_API_KEY(_FILE), not in the URI".into(),
            ));
        }
        let key = toolgraph_schema::secrets::env_secret("TOOLGRAPH_QDRANT_API_KEY").map_err(EngineError::Config)?;
        let timeout = std::time::Duration::from_millis(settings.timeout_ms.max(1));
        return Ok(Arc::new(crate::adapters::qdrant::QdrantStore::connect(
            url,
            key,
            &settings.collection_prefix,
            settings.hnsw_ef,
            timeout,
        )?));
    }
    Err(EngineError::Config(format!("unknown vector store `{uri}`: use embedded:FOLDER or qdrant:http://HOST:6334")))
}
