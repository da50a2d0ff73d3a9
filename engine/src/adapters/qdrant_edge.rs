//! The embedded vector store: Qdrant's in-process engine (`qdrant-edge`), one shard directory per
//! collection under a root folder. Every call runs on the blocking pool, off the async reactor.

use crate::vector::{point_number, CollectionSpec, Conditions, VectorHit, VectorPoint, VectorStore, ID_KEY};
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use qdrant_edge::{
    Condition, CountRequest, CreateIndex, Distance, EdgeConfigBuilder, EdgeShard, EdgeVectorParamsBuilder,
    FieldCondition, FieldIndexOperations, Filter, JsonPath, Match, NamedQuery, Payload, PayloadFieldSchema, PayloadOps,
    PayloadSchemaType, PointId, PointInsertOperations, PointOperations, PointStructPersisted, QueryEnum, QueryRequest,
    ScoringQuery, ScrollRequest, SearchParams, SetPayloadOp, UpdateOperation, ValueVariants, VectorStructPersisted,
    WithPayloadInterface, WithVector, DEFAULT_VECTOR_NAME,
};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const BACKEND: &str = "qdrant-edge";
/// The file a shard directory holds once created.
const CONFIG_FILE: &str = "edge_config.json";

fn err(e: impl std::fmt::Display) -> EngineError {
    EngineError::store(BACKEND, ErrorClass::Permanent, e)
}

/// Qdrant-edge shards under `root`, opened on first use.
pub struct EdgeVectorStore {
    root: PathBuf,
    hnsw_ef: usize,
    shards: Mutex<HashMap<String, Arc<EdgeShard>>>,
    /// Held by every write and flush: qdrant-edge's `flush` takes its WAL and segment locks with
    /// `try_lock` and panics when another write holds them, so two runs remembering at once
    /// (two users' runs ending together) must not write side by side.
    writing: Arc<Mutex<()>>,
    /// Point number → its string id (a number is a digest of its id, so this never goes stale):
    /// a search reads no payload for the ids it has seen before. Payloads are stored compressed
    /// as one blob, so reading the id alone costs as much as reading the whole payload.
    names: Mutex<HashMap<u64, String>>,
}

/// Point ids kept in [`EdgeVectorStore::names`] (then it starts over).
const KEPT_NAMES: usize = 1 << 20;

fn valid_name(name: &str) -> Result<()> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(EngineError::Config(format!("collection name `{name}` must be ASCII letters, digits, _ or -")));
    }
    Ok(())
}

/// A payload key as a JSON path; keys are plain identifiers, anything else is refused.
fn json_path(field: &str) -> Result<JsonPath> {
    if field.is_empty() || !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(EngineError::bad_input(format!("payload field `{field}` must be ASCII letters, digits or _")));
    }
    JsonPath::try_from(field)
        .map_err(|_| EngineError::bad_input(format!("payload field `{field}` is not a valid path")))
}

fn to_filter(c: &Conditions) -> Result<Option<Filter>> {
    if c.is_empty() {
        return Ok(None);
    }
    let mut must = Vec::with_capacity(c.0.len());
    for (f, v) in &c.0 {
        must.push(Condition::Field(FieldCondition::new_match(
            json_path(f)?,
            Match::new_value(ValueVariants::String(v.clone())),
        )));
    }
    Ok(Some(Filter { must: Some(must), ..Default::default() }))
}

fn payload_of(p: Option<Payload>) -> Map<String, Value> {
    p.map(|p| p.0).unwrap_or_default()
}

fn id_of(payload: &Map<String, Value>) -> String {
    payload.get(ID_KEY).and_then(Value::as_str).unwrap_or_default().to_string()
}

impl EdgeVectorStore {
    /// A nearest-neighbour query for the `k` best points satisfying `conditions`.
    fn nearest(
        &self,
        vector: &[f32],
        k: usize,
        conditions: &Conditions,
        with_payload: WithPayloadInterface,
    ) -> Result<QueryRequest> {
        Ok(QueryRequest {
            prefetches: Vec::new(),
            query: Some(ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery::default_dense(vector.to_vec())))),
            filter: to_filter(conditions)?,
            score_threshold: None,
            limit: k,
            offset: 0,
            params: Some(SearchParams { hnsw_ef: Some(self.hnsw_ef.max(k)), ..Default::default() }),
            with_vector: WithVector::Bool(false),
            with_payload,
        })
    }

    /// `hnsw_ef`: beam width of HNSW search (recall against exact search rises with it).
    pub fn open(root: &Path, hnsw_ef: usize) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(|e| err(format!("cannot create {}: {e}", root.display())))?;
        Ok(EdgeVectorStore {
            root: root.to_path_buf(),
            hnsw_ef,
            shards: Mutex::new(HashMap::new()),
            writing: Arc::new(Mutex::new(())),
            names: Mutex::new(HashMap::new()),
        })
    }

    /// The string ids of `points` (numbers; others have none), read from their payloads where
    /// not seen before.
    fn names_of(&self, shard: &EdgeShard, points: &[PointId]) -> Result<Vec<String>> {
        let num = |p: &PointId| match p {
            PointId::NumId(n) => Some(*n),
            _ => None,
        };
        let missing: Vec<PointId> = {
            let names = self.names.lock().map_err(|_| err("id table poisoned"))?;
            points.iter().filter(|p| num(p).is_some_and(|n| !names.contains_key(&n))).copied().collect()
        };
        if !missing.is_empty() {
            let read = shard
                .retrieve(&missing, Some(WithPayloadInterface::Fields(vec![json_path(ID_KEY)?])), None)
                .map_err(err)?;
            let mut names = self.names.lock().map_err(|_| err("id table poisoned"))?;
            if names.len() + read.len() > KEPT_NAMES {
                names.clear();
            }
            for r in read {
                if let Some(n) = num(&r.id) {
                    names.insert(n, id_of(&payload_of(r.payload)));
                }
            }
        }
        let names = self.names.lock().map_err(|_| err("id table poisoned"))?;
        Ok(points.iter().map(|p| num(p).and_then(|n| names.get(&n).cloned()).unwrap_or_default()).collect())
    }

    fn shard(&self, name: &str) -> Result<Arc<EdgeShard>> {
        valid_name(name)?;
        let mut shards = self.shards.lock().map_err(|_| err("shard table poisoned"))?;
        if let Some(s) = shards.get(name) {
            return Ok(s.clone());
        }
        let path = self.root.join(name);
        if !path.join(CONFIG_FILE).exists() {
            return Err(EngineError::NotFound(format!(
                "vector collection `{name}` does not exist in {} (run `toolgraph index`)",
                self.root.display()
            )));
        }
        let shard = Arc::new(load(&path)?);
        shards.insert(name.to_string(), shard.clone());
        Ok(shard)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce(&EdgeShard) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let shard = self.shard(name)?;
        tokio::task::spawn_blocking(move || f(&shard)).await.map_err(err)?
    }

    /// A write, flushed to disk before it returns: qdrant-edge 0.7 does not replay its WAL when a
    /// shard is loaded, so an unflushed write would be lost if the process died (kill -9).
    async fn write<T: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce(&EdgeShard) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let writing = self.writing.clone();
        self.blocking(name, move |shard| {
            let _one_writer = writing.lock().map_err(|_| err("vector store write lock poisoned"))?;
            let r = f(shard)?;
            shard.flush();
            Ok(r)
        })
        .await
    }
}

/// Open an existing shard; its write-ahead log is locked by one process at a time.
fn load(path: &Path) -> Result<EdgeShard> {
    EdgeShard::load(path, None).map_err(|e| {
        let text = e.to_string();
        if text.contains("WouldBlock") {
            err(format!("{} is in use by another toolgraph process (the embedded vector store is single-process; use a Qdrant server to share it)", path.display()))
        } else {
            err(format!("cannot load {}: {text}", path.display()))
        }
    })
}

fn count_matching(shard: &EdgeShard, filter: Option<Filter>) -> Result<usize> {
    shard.count(CountRequest { filter, exact: true }).map_err(err)
}

#[async_trait]
impl VectorStore for EdgeVectorStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn ensure(&self, spec: &CollectionSpec) -> Result<()> {
        valid_name(&spec.name)?;
        let path = self.root.join(&spec.name);
        let spec2 = spec.clone();
        let open = self.shards.lock().map_err(|_| err("shard table poisoned"))?.get(&spec.name).cloned();
        let shard = tokio::task::spawn_blocking(move || -> Result<Arc<EdgeShard>> {
            let shard = if let Some(s) = open {
                s
            } else if path.join(CONFIG_FILE).exists() {
                Arc::new(load(&path)?)
            } else {
                std::fs::create_dir_all(&path).map_err(|e| err(format!("cannot create {}: {e}", path.display())))?;
                let config = EdgeConfigBuilder::new()
                    .vector(DEFAULT_VECTOR_NAME, EdgeVectorParamsBuilder::new(spec2.dim, Distance::Cosine).build())
                    .build();
                let shard = EdgeShard::new(&path, config).map_err(|e| err(format!("cannot create {}: {e}", path.display())))?;
                for field in std::iter::once(ID_KEY).chain(spec2.keyword_fields.iter().map(String::as_str)) {
                    shard
                        .update(UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(CreateIndex {
                            field_name: json_path(field)?,
                            field_schema: Some(PayloadFieldSchema::FieldType(PayloadSchemaType::Keyword)),
                        })))
                        .map_err(err)?;
                }
                Arc::new(shard)
            };
            let have = shard.config().vectors.get(DEFAULT_VECTOR_NAME).map(|v| v.size);
            if have != Some(spec2.dim) {
                return Err(EngineError::Config(format!(
                    "vector collection `{}` holds vectors of size {} but the model gives {}: re-index into a new store folder",
                    spec2.name,
                    have.map(|h| h.to_string()).unwrap_or_else(|| "?".into()),
                    spec2.dim
                )));
            }
            Ok(shard)
        })
        .await
        .map_err(err)??;
        self.shards.lock().map_err(|_| err("shard table poisoned"))?.insert(spec.name.clone(), shard);
        Ok(())
    }

    async fn upsert(&self, collection: &str, points: Vec<VectorPoint>) -> Result<()> {
        if points.is_empty() {
            return Ok(());
        }
        self.write(collection, move |shard| {
            let list = points
                .into_iter()
                .map(|p| {
                    let mut payload = p.payload;
                    payload.insert(ID_KEY.into(), Value::String(p.id.clone()));
                    PointStructPersisted {
                        id: PointId::NumId(point_number(&p.id)),
                        vector: VectorStructPersisted::Single(p.vector),
                        payload: Some(Payload(payload)),
                    }
                })
                .collect();
            shard
                .update(UpdateOperation::PointOperation(PointOperations::UpsertPoints(
                    PointInsertOperations::PointsList(list),
                )))
                .map_err(err)
        })
        .await
    }

    async fn delete(&self, collection: &str, ids: &[String]) -> Result<()> {
        let ids: Vec<PointId> = ids.iter().map(|i| PointId::NumId(point_number(i))).collect();
        self.write(collection, move |shard| {
            shard.update(UpdateOperation::PointOperation(PointOperations::DeletePoints { ids })).map_err(err)
        })
        .await
    }

    async fn delete_matching(&self, collection: &str, conditions: &Conditions) -> Result<usize> {
        let Some(filter) = to_filter(conditions)? else {
            return Err(EngineError::Config("refusing to delete a whole collection with an empty filter".into()));
        };
        self.write(collection, move |shard| {
            let n = count_matching(shard, Some(filter.clone()))?;
            if n > 0 {
                shard
                    .update(UpdateOperation::PointOperation(PointOperations::DeletePointsByFilter(filter)))
                    .map_err(err)?;
            }
            Ok(n)
        })
        .await
    }

    async fn set_payload(&self, collection: &str, id: &str, payload: Map<String, Value>) -> Result<bool> {
        let pid = PointId::NumId(point_number(id));
        self.write(collection, move |shard| {
            if shard
                .retrieve(&[pid], Some(WithPayloadInterface::Bool(false)), Some(WithVector::Bool(false)))
                .map_err(err)?
                .is_empty()
            {
                return Ok(false);
            }
            let mut payload = payload;
            payload.remove(ID_KEY);
            let op = SetPayloadOp { payload: Payload(payload), points: Some(vec![pid]), filter: None, key: None };
            shard.update(UpdateOperation::PayloadOperation(PayloadOps::SetPayload(op))).map_err(err)?;
            Ok(true)
        })
        .await
    }

    async fn retrieve(&self, collection: &str, ids: &[String]) -> Result<Vec<(String, Map<String, Value>)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let pids: Vec<PointId> = ids.iter().map(|i| PointId::NumId(point_number(i))).collect();
        // (On the calling thread, as a search: a few points' payloads.)
        let shard = self.shard(collection)?;
        let records = shard
            .retrieve(&pids, Some(WithPayloadInterface::Bool(true)), Some(WithVector::Bool(false)))
            .map_err(err)?;
        Ok(records
            .into_iter()
            .map(|r| {
                let payload = payload_of(r.payload);
                (id_of(&payload), payload)
            })
            .collect())
    }

    async fn search_ids(
        &self,
        collection: &str,
        vector: &[f32],
        k: usize,
        conditions: &Conditions,
    ) -> Result<Vec<(String, f32)>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let request = self.nearest(vector, k, conditions, WithPayloadInterface::Bool(false))?;
        let shard = self.shard(collection)?;
        let points = shard.query(request).map_err(err)?;
        let ids: Vec<PointId> = points.iter().map(|p| p.id).collect();
        let names = self.names_of(&shard, &ids)?;
        Ok(names.into_iter().zip(points).map(|(id, p)| (id, p.score)).collect())
    }

    async fn search(
        &self,
        collection: &str,
        vector: &[f32],
        k: usize,
        conditions: &Conditions,
    ) -> Result<Vec<VectorHit>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let request = self.nearest(vector, k, conditions, WithPayloadInterface::Bool(true))?;
        // Search runs on the calling thread: it is sub-millisecond, and the blocking pool's hop
        // would cost more than it saves.
        let shard = self.shard(collection)?;
        let points = shard.query(request).map_err(err)?;
        Ok(points
            .into_iter()
            .map(|p| {
                let payload = payload_of(p.payload);
                VectorHit { id: id_of(&payload), score: p.score, payload }
            })
            .collect())
    }

    async fn scan(&self, collection: &str, fields: &[&str]) -> Result<Vec<(String, Map<String, Value>)>> {
        let mut wanted: Vec<JsonPath> = fields.iter().map(|f| json_path(f)).collect::<Result<_>>()?;
        wanted.push(json_path(ID_KEY)?);
        self.blocking(collection, move |shard| {
            let mut out = Vec::new();
            let mut offset = None;
            loop {
                let (records, next) = shard
                    .scroll(ScrollRequest {
                        offset,
                        limit: Some(1000),
                        filter: None,
                        with_payload: Some(WithPayloadInterface::Fields(wanted.clone())),
                        with_vector: WithVector::Bool(false),
                        order_by: None,
                    })
                    .map_err(err)?;
                for r in records {
                    let payload = payload_of(r.payload);
                    out.push((id_of(&payload), payload));
                }
                match next {
                    Some(n) => offset = Some(n),
                    None => return Ok(out),
                }
            }
        })
        .await
    }

    async fn count(&self, collection: &str) -> Result<usize> {
        self.blocking(collection, |shard| count_matching(shard, None)).await
    }

    async fn begin_rebuild(&self, spec: &CollectionSpec) -> Result<String> {
        let staging = format!("{}__rebuild", spec.name);
        self.shards.lock().map_err(|_| err("shard table poisoned"))?.remove(&staging);
        let path = self.root.join(&staging);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| err(format!("cannot clear {}: {e}", path.display())))?;
        }
        self.ensure(&CollectionSpec { name: staging.clone(), ..spec.clone() }).await?;
        Ok(staging)
    }

    async fn commit_rebuild(&self, name: &str, staging: &str) -> Result<()> {
        valid_name(name)?;
        valid_name(staging)?;
        let mut shards = self.shards.lock().map_err(|_| err("shard table poisoned"))?;
        // Close both shards (flushes them) before moving their folders.
        shards.remove(name);
        if let Some(s) = shards.remove(staging) {
            let _one_writer = self.writing.lock().map_err(|_| err("vector store write lock poisoned"))?;
            s.flush();
        }
        let live = self.root.join(name);
        let old = self.root.join(format!("{name}__old"));
        let _ = std::fs::remove_dir_all(&old);
        if live.exists() {
            std::fs::rename(&live, &old).map_err(|e| err(format!("cannot move {}: {e}", live.display())))?;
        }
        std::fs::rename(self.root.join(staging), &live)
            .map_err(|e| err(format!("cannot move the rebuilt {name} in place: {e}")))?;
        let _ = std::fs::remove_dir_all(&old);
        Ok(())
    }

    async fn optimize(&self, collection: &str) -> Result<()> {
        let writing = self.writing.clone();
        self.blocking(collection, move |shard| {
            let _one_writer = writing.lock().map_err(|_| err("vector store write lock poisoned"))?;
            shard.optimize().map_err(err)?;
            shard.flush();
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes from many tasks at once (two users' runs remembering together) all land: the
    /// store lets one write and its flush run at a time, where qdrant-edge's flush would panic on
    /// a lock another write holds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writes_all_land_and_none_panics() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EdgeVectorStore::open(dir.path(), 64).unwrap());
        store.ensure(&CollectionSpec::new("memory", 4, &["kind"])).await.unwrap();
        let mut tasks = Vec::new();
        for t in 0..8 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    let id = format!("p{t}-{i}");
                    let mut payload = Map::new();
                    payload.insert("kind".into(), Value::from("run"));
                    let v = vec![1.0 + t as f32, i as f32, 1.0, 0.5];
                    store.upsert("memory", vec![VectorPoint { id, vector: v, payload }]).await?;
                }
                Ok::<(), EngineError>(())
            }));
        }
        for t in tasks {
            t.await.expect("a write panicked").unwrap();
        }
        assert_eq!(store.count("memory").await.unwrap(), 200);
    }
}
