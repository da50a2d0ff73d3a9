//! Long-term memory (thesis §4.4.4): judged-good (request → chain) pairs in the vector store's
//! `memory` collection. The same request replaces its old entry; invalidating an API deletes the
//! entries that use it; a new request recalls the nearest entries.

use crate::plan::ArgSource;
use crate::vector::{text_hash, CollectionSpec, Conditions, VectorPoint, VectorStore, MEMORY};
use crate::{EngineError, ErrorClass, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// One remembered call: the API and where each argument came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryStep {
    pub api: String,
    pub arguments: Map<String, Value>,
    pub sources: HashMap<String, ArgSource>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub request: String,
    pub chain: Vec<MemoryStep>,
}

/// A recalled entry and its similarity to the new request.
#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    pub score: f32,
    pub entry: MemoryEntry,
}

pub struct Memory {
    vectors: Arc<dyn VectorStore>,
    collection: String,
}

/// The point id of a request: the same request (case and spacing aside) is one entry.
pub fn entry_id(request: &str) -> String {
    let norm: String = request.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    format!("mem-{}", text_hash(&norm))
}

impl Memory {
    /// Open (and create if missing) the memory collection for vectors of `dim` dimensions.
    pub async fn open(vectors: Arc<dyn VectorStore>, dim: usize) -> Result<Self> {
        vectors.ensure(&CollectionSpec::new(MEMORY, dim, &["apis"])).await?;
        Ok(Memory { vectors, collection: MEMORY.to_string() })
    }

    pub async fn remember(&self, request: &str, vector: Vec<f32>, chain: Vec<MemoryStep>) -> Result<()> {
        let mut payload = Map::new();
        let apis: Vec<Value> = chain.iter().map(|s| Value::String(s.api.clone())).collect();
        let entry = MemoryEntry { request: request.to_string(), chain };
        payload.insert("request".into(), Value::String(request.to_string()));
        payload.insert("apis".into(), Value::Array(apis));
        payload.insert("chain".into(), Value::String(serde_json::to_string(&entry.chain).map_err(|e| EngineError::store("memory", ErrorClass::Permanent, e))?));
        self.vectors.upsert(&self.collection, vec![VectorPoint { id: entry_id(request), vector, payload }]).await
    }

    pub async fn recall(&self, vector: &[f32], k: usize) -> Result<Vec<Recalled>> {
        let hits = self.vectors.search(&self.collection, vector, k, &Conditions::default()).await?;
        Ok(hits
            .into_iter()
            .filter_map(|h| {
                let request = h.payload.get("request")?.as_str()?.to_string();
                let chain: Vec<MemoryStep> = serde_json::from_str(h.payload.get("chain")?.as_str()?).ok()?;
                Some(Recalled { score: h.score, entry: MemoryEntry { request, chain } })
            })
            .collect())
    }

    /// Delete every memory whose chain uses `api_id`.
    pub async fn forget_api(&self, api_id: &str) -> Result<usize> {
        self.vectors.delete_matching(&self.collection, &Conditions::default().with("apis", api_id)).await
    }

    /// Every stored entry: (point id, entry), newest writes not ordered (the console sorts).
    pub async fn list(&self) -> Result<Vec<(String, MemoryEntry)>> {
        let points = self.vectors.scan(&self.collection, &["request", "chain"]).await?;
        Ok(points
            .into_iter()
            .filter_map(|(id, p)| {
                let request = p.get("request")?.as_str()?.to_string();
                let chain: Vec<MemoryStep> = serde_json::from_str(p.get("chain")?.as_str()?).ok()?;
                Some((id, MemoryEntry { request, chain }))
            })
            .collect())
    }

    /// Delete one entry by its point id; false when there was none.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        let exists = self.vectors.scan(&self.collection, &[]).await?.iter().any(|(p, _)| p == id);
        if exists {
            self.vectors.delete(&self.collection, &[id.to_string()]).await?;
        }
        Ok(exists)
    }

    pub async fn len(&self) -> Result<usize> {
        self.vectors.count(&self.collection).await
    }

    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }
}
