//! The vector-store port: named collections of unit vectors with a JSON payload, searched by
//! cosine similarity with keyword filters. Adapters: Qdrant's in-process engine (`qdrant-edge`,
//! the embedded default) and a Qdrant server (`qdrant-client`, gRPC).

use crate::Result;
use async_trait::async_trait;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The collection of API texts (seed-tool retrieval).
pub const APIS: &str = "apis";
/// The collection of long-term memories (request → chain).
pub const MEMORY: &str = "memory";
/// The collection of usage vectors: per API, the mean embedding of the requests it served.
pub const USAGE: &str = "usage";
/// Payload key that holds a point's string id (backends key points by number or UUID).
pub const ID_KEY: &str = "id";

/// A point to store: a string id, a unit vector and a payload (`ID_KEY` is set by the store).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorPoint {
    /// Its id.
    pub id: String,
    /// The vector.
    pub vector: Vec<f32>,
    /// Fields stored with it.
    pub payload: Map<String, Value>,
}

/// A search result with its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHit {
    /// The point's id.
    pub id: String,
    /// Its cosine similarity to the query.
    pub score: f32,
    /// Its payload fields.
    pub payload: Map<String, Value>,
}

/// Keyword conditions, all of which must hold; a payload array matches when any element does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conditions(pub Vec<(String, String)>);

impl Conditions {
    /// Whether it has no condition.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Adds the condition `field` = `value`.
    pub fn with(mut self, field: &str, value: &str) -> Self {
        self.0.push((field.to_string(), value.to_string()));
        self
    }
    /// Whether `payload` satisfies every condition (the reference semantics both backends follow).
    pub fn accepts(&self, payload: &Map<String, Value>) -> bool {
        self.0.iter().all(|(f, v)| match payload.get(f) {
            Some(Value::String(s)) => s == v,
            Some(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some(v)),
            _ => false,
        })
    }
}

/// How a collection is laid out: vector size and the payload fields filtered on (indexed).
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionSpec {
    /// The collection's name.
    pub name: String,
    /// Its vectors' dimension.
    pub dim: usize,
    /// Payload fields indexed for filters.
    pub keyword_fields: Vec<String>,
}

impl CollectionSpec {
    /// A collection of `dim`-dimensional vectors, `keyword_fields` indexed.
    pub fn new(name: &str, dim: usize, keyword_fields: &[&str]) -> Self {
        CollectionSpec {
            name: name.into(),
            dim,
            keyword_fields: keyword_fields.iter().map(|s| s.to_string()).collect(),
        }
    }
}

#[async_trait]
/// Stores of vectors with payloads (qdrant-edge embedded, or a Qdrant server).
pub trait VectorStore: Send + Sync {
    /// Its name in reports (`qdrant-edge`, `qdrant`).
    fn backend(&self) -> &'static str;
    /// Create the collection (cosine distance) and its payload indexes if missing. An existing
    /// collection with another vector size is an error naming both sizes.
    async fn ensure(&self, spec: &CollectionSpec) -> Result<()>;
    /// Insert or replace points by id.
    async fn upsert(&self, collection: &str, points: Vec<VectorPoint>) -> Result<()>;
    /// Delete points by id (missing ids are ignored).
    async fn delete(&self, collection: &str, ids: &[String]) -> Result<()>;
    /// Delete every point matching `conditions`; returns how many were deleted.
    async fn delete_matching(&self, collection: &str, conditions: &Conditions) -> Result<usize>;
    /// Set payload keys of one point; false when the point does not exist.
    async fn set_payload(&self, collection: &str, id: &str, payload: Map<String, Value>) -> Result<bool>;
    /// The `k` nearest points to `vector` that satisfy `conditions`, best first.
    async fn search(
        &self,
        collection: &str,
        vector: &[f32],
        k: usize,
        conditions: &Conditions,
    ) -> Result<Vec<VectorHit>>;
    /// Like [`Self::search`], ids and scores only (backends skip reading payloads).
    async fn search_ids(
        &self,
        collection: &str,
        vector: &[f32],
        k: usize,
        conditions: &Conditions,
    ) -> Result<Vec<(String, f32)>> {
        Ok(self.search(collection, vector, k, conditions).await?.into_iter().map(|h| (h.id, h.score)).collect())
    }
    /// The points `ids` names that exist, with their whole payloads, in the order asked.
    async fn retrieve(&self, collection: &str, ids: &[String]) -> Result<Vec<(String, Map<String, Value>)>>;
    /// Every point's id and the payload `fields` asked for (for incremental re-indexing).
    async fn scan(&self, collection: &str, fields: &[&str]) -> Result<Vec<(String, Map<String, Value>)>>;
    /// How many points a collection holds.
    async fn count(&self, collection: &str) -> Result<usize>;
    /// Start a full rebuild of `spec.name`: returns the name of an empty staging collection to fill
    /// with the same calls; searches keep using the live one until [`Self::commit_rebuild`].
    async fn begin_rebuild(&self, spec: &CollectionSpec) -> Result<String>;
    /// Make the staging collection the live `name`, dropping the old one.
    async fn commit_rebuild(&self, name: &str, staging: &str) -> Result<()>;
    /// Build search indexes after bulk writes (HNSW on the embedded engine; a no-op on a server,
    /// which indexes in the background).
    async fn optimize(&self, collection: &str) -> Result<()>;
}

/// A stable numeric point id for a string id (first 8 bytes of its SHA-256).
pub fn point_number(id: &str) -> u64 {
    let h = Sha256::digest(id.as_bytes());
    u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]])
}

/// A hex digest of a text, kept in payloads to tell changed texts apart.
pub fn text_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().take(12).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_match_strings_and_arrays() {
        let p = json!({"category": "Data", "apis": ["a/b/c", "a/b/d"]}).as_object().unwrap().clone();
        assert!(Conditions::default().with("category", "Data").accepts(&p));
        assert!(Conditions::default().with("apis", "a/b/d").accepts(&p));
        assert!(!Conditions::default().with("apis", "x").accepts(&p));
        assert!(!Conditions::default().with("tool", "t").accepts(&p));
        assert_ne!(point_number("a"), point_number("b"));
        assert_eq!(point_number("a"), point_number("a"));
    }
}
