//! Opening a graph store from its URI.

use crate::adapters::{embedded::EmbeddedStore, falkordb, neo4j};
use crate::graph::GraphStore;
use crate::{EngineError, Result};
use secrecy::SecretString;
use std::path::PathBuf;
use std::sync::Arc;
use toolgraph_schema::StoreSettings;

/// Where a graph lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUri {
    Embedded(PathBuf),
    Neo4j(String),
    FalkorDb(String),
}

impl StoreUri {
    /// `embedded:PATH`, `neo4j://HOST:PORT` (also `bolt://`, `neo4j+s://`) or `falkordb://HOST:PORT`.
    pub fn parse(uri: &str) -> Result<Self> {
        let uri = uri.trim();
        if let Some(path) = uri.strip_prefix("embedded:") {
            if path.is_empty() {
                return Err(EngineError::Config("embedded store needs a path: embedded:PATH".into()));
            }
            return Ok(StoreUri::Embedded(PathBuf::from(path)));
        }
        if let Some(rest) = uri.strip_prefix("falkordb://").or_else(|| uri.strip_prefix("falkor://")) {
            let host_port = rest.trim_end_matches('/');
            if host_port.is_empty() || host_port.contains('@') {
                return Err(EngineError::Config(
                    "falkordb store is falkordb://HOST:PORT (no credentials in the URI)".into(),
                ));
            }
            return Ok(StoreUri::FalkorDb(host_port.to_string()));
        }
        for scheme in ["neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://"] {
            if let Some(rest) = uri.strip_prefix(scheme) {
                if rest.contains('@') {
                    return Err(EngineError::Config(
                        "put Neo4j credentials in TOOLGRAPH_NEO4J_PASSWORD(_FILE) and store.neo4j_user, not in the URI".into(),
                    ));
                }
                return Ok(StoreUri::Neo4j(uri.to_string()));
            }
        }
        Err(EngineError::Config(format!(
            "unknown store `{uri}`: use embedded:PATH, neo4j://HOST:PORT or falkordb://HOST:PORT"
        )))
    }
}

/// Open the vector store `settings.uri` names: `embedded:FOLDER` or `qdrant:http://HOST:6334`.
pub fn open_vectors(settings: &toolgraph_schema::VectorSettings) -> Result<Arc<dyn crate::vector::VectorStore>> {
    let uri = settings.uri.trim();
    if let Some(path) = uri.strip_prefix("embedded:") {
        if path.is_empty() {
            return Err(EngineError::Config("embedded vector store needs a folder: embedded:FOLDER".into()));
        }
        return Ok(Arc::new(crate::adapters::qdrant_edge::EdgeVectorStore::open(std::path::Path::new(path), settings.hnsw_ef)?));
    }
    if let Some(url) = uri.strip_prefix("qdrant:") {
        if url.contains('@') || url.contains("api-key") || url.contains("api_key") {
            return Err(EngineError::Config(
                "put the Qdrant API key in TOOLGRAPH_QDRANT_API_KEY(_FILE), not in the URI".into(),
            ));
        }
        let key = secret_from_env("TOOLGRAPH_QDRANT_API_KEY")?;
        let timeout = std::time::Duration::from_millis(settings.timeout_ms.max(1));
        return Ok(Arc::new(crate::adapters::qdrant::QdrantStore::connect(url, key, &settings.collection_prefix, settings.hnsw_ef, timeout)?));
    }
    Err(EngineError::Config(format!("unknown vector store `{uri}`: use embedded:FOLDER or qdrant:http://HOST:6334")))
}

/// An optional secret from `NAME` or the file named by `NAME_FILE`.
fn secret_from_env(name: &str) -> Result<Option<SecretString>> {
    if let Ok(v) = std::env::var(name) {
        return Ok(Some(SecretString::from(v)));
    }
    if let Ok(path) = std::env::var(format!("{name}_FILE")) {
        let text = std::fs::read_to_string(&path).map_err(|e| EngineError::Config(format!("cannot read {name}_FILE {path}: {e}")))?;
        return Ok(Some(SecretString::from(text.trim_end_matches(['\n', '\r']).to_string())));
    }
    Ok(None)
}

/// Read the Neo4j password from `TOOLGRAPH_NEO4J_PASSWORD` or the file named by
/// `TOOLGRAPH_NEO4J_PASSWORD_FILE`. A missing secret is an error, never an empty password.
pub fn neo4j_password() -> Result<SecretString> {
    if let Ok(p) = std::env::var("TOOLGRAPH_NEO4J_PASSWORD") {
        return Ok(SecretString::from(p));
    }
    if let Ok(path) = std::env::var("TOOLGRAPH_NEO4J_PASSWORD_FILE") {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| EngineError::Config(format!("cannot read TOOLGRAPH_NEO4J_PASSWORD_FILE {path}: {e}")))?;
        return Ok(SecretString::from(text.trim_end_matches(['\n', '\r']).to_string()));
    }
    Err(EngineError::Config(
        "the neo4j store needs a password: set TOOLGRAPH_NEO4J_PASSWORD or TOOLGRAPH_NEO4J_PASSWORD_FILE".into(),
    ))
}

/// Open the store `settings.uri` names and run its setup.
pub async fn open(settings: &StoreSettings) -> Result<Arc<dyn GraphStore>> {
    let store: Arc<dyn GraphStore> = match StoreUri::parse(&settings.uri)? {
        StoreUri::Embedded(path) => Arc::new(EmbeddedStore::open(&path)?),
        StoreUri::FalkorDb(host_port) => {
            Arc::new(falkordb::connect(&host_port, &settings.graph, settings.batch_rows).await?)
        }
        StoreUri::Neo4j(uri) => {
            let password = neo4j_password()?;
            Arc::new(neo4j::connect(&uri, &settings.neo4j_user, &password, &settings.neo4j_database, settings.batch_rows).await?)
        }
    };
    store.setup().await?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse() {
        assert_eq!(StoreUri::parse("embedded:/tmp/g.redb").unwrap(), StoreUri::Embedded("/tmp/g.redb".into()));
        assert_eq!(StoreUri::parse("falkordb://127.0.0.1:6380").unwrap(), StoreUri::FalkorDb("127.0.0.1:6380".into()));
        assert_eq!(StoreUri::parse("neo4j://db:7687").unwrap(), StoreUri::Neo4j("neo4j://db:7687".into()));
        assert!(StoreUri::parse("neo4j://u:secret@db:7687").unwrap_err().to_string().contains("TOOLGRAPH_NEO4J_PASSWORD"));
        assert!(!StoreUri::parse("neo4j://u:secret@db:7687").unwrap_err().to_string().contains("secret@"));
        assert!(StoreUri::parse("mysql://x").is_err());
        assert!(StoreUri::parse("embedded:").is_err());
    }
}
