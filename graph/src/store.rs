//! Opening a graph store from its URI.

use crate::adapters::{embedded::EmbeddedStore, falkordb, neo4j};
use crate::GraphStore;
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
                        "put Neo4j credentials in TOOLGRAPH_NEO4J_PASSWORD(_FILE) and store.neo4j_user, not in the URI"
                            .into(),
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

/// Read the Neo4j password from `TOOLGRAPH_NEO4J_PASSWORD` or the file named by
/// `TOOLGRAPH_NEO4J_PASSWORD_FILE`. A missing secret is an error, never an empty password.
pub fn neo4j_password() -> Result<SecretString> {
    toolgraph_schema::secrets::env_secret("TOOLGRAPH_NEO4J_PASSWORD").map_err(EngineError::Config)?.ok_or_else(|| {
        EngineError::Config(
            "the neo4j store needs a password: set TOOLGRAPH_NEO4J_PASSWORD or TOOLGRAPH_NEO4J_PASSWORD_FILE".into(),
        )
    })
}

/// Open the store `settings.uri` names and run its setup.
pub async fn open(settings: &StoreSettings) -> Result<Arc<dyn GraphStore>> {
    let store: Arc<dyn GraphStore> = match StoreUri::parse(&settings.uri)? {
        StoreUri::Embedded(path) => Arc::new(EmbeddedStore::open(&path)?),
        StoreUri::FalkorDb(host_port) => Arc::new(
            falkordb::connect(&host_port, &settings.graph, settings.batch_rows)
                .await?
                .with_query_slots(settings.query_max_running),
        ),
        StoreUri::Neo4j(uri) => {
            let password = neo4j_password()?;
            Arc::new(
                neo4j::connect(&uri, &settings.neo4j_user, &password, &settings.neo4j_database, settings.batch_rows)
                    .await?
                    .with_query_slots(settings.query_max_running),
            )
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
        assert!(StoreUri::parse("neo4j://u:secret@db:7687")
            .unwrap_err()
            .to_string()
            .contains("TOOLGRAPH_NEO4J_PASSWORD"));
        assert!(!StoreUri::parse("neo4j://u:secret@db:7687").unwrap_err().to_string().contains("secret@"));
        assert!(StoreUri::parse("mysql://x").is_err());
        assert!(StoreUri::parse("embedded:").is_err());
    }
}
