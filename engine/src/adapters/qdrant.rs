//! The Qdrant server vector store (gRPC via `qdrant-client`). Each logical collection (`apis`,
//! `memory`) is an alias `PREFIX_NAME` pointing at a physical collection `PREFIX_NAME_vN`; a full
//! rebuild fills a new physical collection and then moves the alias, so searches never see a
//! half-built index. Payload indexes (keyword) are created for the fields filters use.
//!
//! Requests are built by pure functions ([`requests`]) so they can be tested without a server;
//! integration tests run against a real server when `QDRANT_URL` is set (see README).

use crate::vector::{point_number, CollectionSpec, Conditions, VectorHit, VectorPoint, VectorStore, ID_KEY};
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use qdrant_client::qdrant::{PointId, ScrollPoints};
use qdrant_client::{Qdrant, QdrantError};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};
use std::time::Duration;

const BACKEND: &str = "qdrant";

fn err(e: QdrantError) -> EngineError {
    let class = match &e {
        QdrantError::ResponseError { status } => match status.code() {
            tonic::Code::Unavailable
            | tonic::Code::DeadlineExceeded
            | tonic::Code::ResourceExhausted
            | tonic::Code::Aborted => ErrorClass::Transient,
            tonic::Code::InvalidArgument => ErrorClass::BadInput,
            _ => ErrorClass::Permanent,
        },
        _ => ErrorClass::Transient,
    };
    EngineError::store(BACKEND, class, e)
}

/// Request builders: everything the adapter sends, without a connection.
pub mod requests {
    use super::*;
    use qdrant_client::qdrant::{
        Condition, CountPointsBuilder, CreateAliasBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
        DeletePointsBuilder, Distance, FieldType, Filter, PointStruct, PointsIdsList, QueryPointsBuilder,
        ScrollPointsBuilder, SearchParamsBuilder, SetPayloadPointsBuilder, UpsertPointsBuilder, VectorParamsBuilder,
    };

    /// The alias a collection is reached by (`prefix` + `name`).
    pub fn alias(prefix: &str, name: &str) -> String {
        format!("{prefix}_{name}")
    }
    /// The physical collection behind an alias, one per schema version.
    pub fn physical(prefix: &str, name: &str, version: u64) -> String {
        format!("{prefix}_{name}_v{version}")
    }
    /// The version of a physical collection name of this alias, if it is one.
    pub fn version_of(prefix: &str, name: &str, physical: &str) -> Option<u64> {
        physical.strip_prefix(&format!("{}_v", alias(prefix, name)))?.parse().ok()
    }

    /// The request that creates a collection of `dim`-dimensional cosine vectors.
    pub fn create_collection(collection: &str, dim: usize) -> qdrant_client::qdrant::CreateCollection {
        CreateCollectionBuilder::new(collection)
            .vectors_config(VectorParamsBuilder::new(dim as u64, Distance::Cosine))
            .build()
    }
    /// The request that indexes a keyword payload field (filters read it).
    pub fn keyword_index(collection: &str, field: &str) -> qdrant_client::qdrant::CreateFieldIndexCollection {
        CreateFieldIndexCollectionBuilder::new(collection, field, FieldType::Keyword).wait(true).build()
    }
    /// The request that points `alias` at `collection`.
    pub fn create_alias(collection: &str, alias: &str) -> qdrant_client::qdrant::CreateAlias {
        CreateAliasBuilder::new(collection, alias).build()
    }
    /// Qdrant's filter for the port's conditions (`None`: no condition).
    pub fn filter(c: &Conditions) -> Option<Filter> {
        (!c.is_empty()).then(|| Filter::must(c.0.iter().map(|(f, v)| Condition::matches(f.clone(), v.clone()))))
    }
    /// The point id of a string id (a UUID derived from it, the same every time).
    pub fn point_id(id: &str) -> PointId {
        PointId::from(point_number(id))
    }
    /// The request that reads points `ids` of a collection with their payloads (no vectors).
    pub fn get(collection: &str, ids: &[String]) -> qdrant_client::qdrant::GetPoints {
        qdrant_client::qdrant::GetPointsBuilder::new(collection, ids.iter().map(|i| point_id(i)).collect::<Vec<_>>())
            .with_payload(true)
            .with_vectors(false)
            .build()
    }
    /// The request that writes `points` (vectors and payloads) into a collection.
    pub fn upsert(collection: &str, points: Vec<VectorPoint>) -> qdrant_client::qdrant::UpsertPoints {
        let points: Vec<PointStruct> = points
            .into_iter()
            .map(|p| {
                let mut payload = p.payload;
                payload.insert(ID_KEY.into(), Value::String(p.id.clone()));
                PointStruct::new(point_id(&p.id), p.vector, qdrant_client::Payload::from(payload))
            })
            .collect();
        UpsertPointsBuilder::new(collection, points).wait(true).build()
    }
    /// The request that deletes points by their string ids.
    pub fn delete_ids(collection: &str, ids: &[String]) -> qdrant_client::qdrant::DeletePoints {
        let ids: Vec<PointId> = ids.iter().map(|i| point_id(i)).collect();
        DeletePointsBuilder::new(collection).points(PointsIdsList { ids }).wait(true).build()
    }
    /// The request that deletes the points a filter matches.
    pub fn delete_filter(collection: &str, filter: Filter) -> qdrant_client::qdrant::DeletePoints {
        DeletePointsBuilder::new(collection).points(filter).wait(true).build()
    }
    /// The request that counts a collection's points (those a filter matches, if given).
    pub fn count(collection: &str, filter: Option<Filter>) -> qdrant_client::qdrant::CountPoints {
        let b = CountPointsBuilder::new(collection).exact(true);
        match filter {
            Some(f) => b.filter(f).build(),
            None => b.build(),
        }
    }
    /// The request that sets payload fields of one point.
    pub fn set_payload(
        collection: &str,
        id: &str,
        mut payload: Map<String, Value>,
    ) -> qdrant_client::qdrant::SetPayloadPoints {
        payload.remove(ID_KEY);
        let payload: std::collections::HashMap<String, qdrant_client::qdrant::Value> =
            qdrant_client::Payload::from(payload).into();
        SetPayloadPointsBuilder::new(collection, payload)
            .points_selector(PointsIdsList { ids: vec![point_id(id)] })
            .wait(true)
            .build()
    }
    /// The request for the `k` nearest points to a vector, with their payloads.
    pub fn search(
        collection: &str,
        vector: &[f32],
        k: usize,
        conditions: &Conditions,
        hnsw_ef: usize,
    ) -> qdrant_client::qdrant::QueryPoints {
        let b = QueryPointsBuilder::new(collection)
            .query(vector.to_vec())
            .limit(k as u64)
            .with_payload(true)
            .params(SearchParamsBuilder::default().hnsw_ef(hnsw_ef.max(k) as u64));
        match filter(conditions) {
            Some(f) => b.filter(f).build(),
            None => b.build(),
        }
    }
    /// [`search`] reading only each point's id from its payload.
    pub fn search_ids(
        collection: &str,
        vector: &[f32],
        k: usize,
        conditions: &Conditions,
        hnsw_ef: usize,
    ) -> qdrant_client::qdrant::QueryPoints {
        let mut q = search(collection, vector, k, conditions, hnsw_ef);
        q.with_payload = Some(vec![ID_KEY].into());
        q
    }
    /// The request for one page of a collection's points with the named payload fields.
    pub fn scroll(collection: &str, fields: &[&str], offset: Option<PointId>) -> ScrollPoints {
        let mut include: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        include.push(ID_KEY.into());
        let b = ScrollPointsBuilder::new(collection)
            .limit(1000)
            .with_payload(qdrant_client::qdrant::PayloadIncludeSelector { fields: include });
        match offset {
            Some(o) => b.offset(o).build(),
            None => b.build(),
        }
    }
}

fn to_map(payload: std::collections::HashMap<String, qdrant_client::qdrant::Value>) -> Map<String, Value> {
    payload.into_iter().map(|(k, v)| (k, v.into_json())).collect()
}

fn id_of(payload: &Map<String, Value>) -> String {
    payload.get(ID_KEY).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// A Qdrant server connection with this deployment's collection prefix.
pub struct QdrantStore {
    client: Qdrant,
    prefix: String,
    hnsw_ef: usize,
}

impl QdrantStore {
    /// `url` like `http://HOST:6334` (gRPC port). The API key is optional and never logged.
    pub fn connect(
        url: &str,
        api_key: Option<SecretString>,
        prefix: &str,
        hnsw_ef: usize,
        timeout: Duration,
    ) -> Result<Self> {
        let mut b = Qdrant::from_url(url).timeout(timeout).connect_timeout(timeout).skip_compatibility_check();
        if let Some(key) = api_key {
            b = b.api_key(key.expose_secret().to_string());
        }
        let client = b.build().map_err(err)?;
        Ok(QdrantStore { client, prefix: prefix.to_string(), hnsw_ef })
    }

    fn alias(&self, name: &str) -> String {
        requests::alias(&self.prefix, name)
    }

    /// The physical collection the alias points at, if any.
    async fn target(&self, name: &str) -> Result<Option<String>> {
        let alias = self.alias(name);
        let aliases = self.client.list_aliases().await.map_err(err)?;
        Ok(aliases.aliases.into_iter().find(|a| a.alias_name == alias).map(|a| a.collection_name))
    }

    async fn create_physical(&self, spec: &CollectionSpec, physical: &str) -> Result<()> {
        self.client.create_collection(requests::create_collection(physical, spec.dim)).await.map_err(err)?;
        for field in std::iter::once(ID_KEY).chain(spec.keyword_fields.iter().map(String::as_str)) {
            self.client.create_field_index(requests::keyword_index(physical, field)).await.map_err(err)?;
        }
        Ok(())
    }

    /// The collection requests go to: logical names go through their alias, physical staging
    /// names (`PREFIX_NAME_vN`) are used as they are.
    fn resolve(&self, collection: &str) -> String {
        if collection.starts_with(&format!("{}_", self.prefix)) {
            collection.to_string()
        } else {
            self.alias(collection)
        }
    }

    async fn begin_rebuild_impl(&self, spec: &CollectionSpec) -> Result<String> {
        let current = self.target(&spec.name).await?;
        let next = current.as_deref().and_then(|c| requests::version_of(&self.prefix, &spec.name, c)).unwrap_or(0) + 1;
        let physical = requests::physical(&self.prefix, &spec.name, next);
        self.create_physical(spec, &physical).await?;
        Ok(physical)
    }

    async fn commit_rebuild_impl(&self, name: &str, physical: &str) -> Result<()> {
        let alias = self.alias(name);
        let old = self.target(name).await?;
        if old.is_some() {
            // The client sends one alias action per request: between these two calls the alias is
            // briefly absent (milliseconds); searches in that window fail as transient errors.
            self.client
                .delete_alias(qdrant_client::qdrant::DeleteAlias { alias_name: alias.clone() })
                .await
                .map_err(err)?;
        }
        self.client.create_alias(requests::create_alias(physical, &alias)).await.map_err(err)?;
        if let Some(old) = old.filter(|o| o != physical) {
            self.client.delete_collection(old).await.map_err(err)?;
        }
        Ok(())
    }
}

#[async_trait]
impl VectorStore for QdrantStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn ensure(&self, spec: &CollectionSpec) -> Result<()> {
        if spec.name.starts_with(&format!("{}_", self.prefix)) {
            // A physical (staging) collection made by begin_rebuild.
            if !self.client.collection_exists(spec.name.clone()).await.map_err(err)? {
                self.create_physical(spec, &spec.name).await?;
            }
            return Ok(());
        }
        let alias = self.alias(&spec.name);
        match self.target(&spec.name).await? {
            Some(physical) => {
                let info = self.client.collection_info(physical.clone()).await.map_err(err)?;
                let size =
                    info.result.and_then(|r| r.config).and_then(|c| c.params).and_then(|p| p.vectors_config).and_then(
                        |v| match v.config {
                            Some(qdrant_client::qdrant::vectors_config::Config::Params(p)) => Some(p.size as usize),
                            _ => None,
                        },
                    );
                if size != Some(spec.dim) {
                    return Err(EngineError::Config(format!(
                        "Qdrant collection {physical} (alias {alias}) holds vectors of size {size:?}, the model gives {}: rebuild with `toolgraph index --rebuild`",
                        spec.dim
                    )));
                }
                Ok(())
            }
            None => {
                let physical = requests::physical(&self.prefix, &spec.name, 1);
                if !self.client.collection_exists(physical.clone()).await.map_err(err)? {
                    self.create_physical(spec, &physical).await?;
                }
                self.client.create_alias(requests::create_alias(&physical, &alias)).await.map_err(err)?;
                Ok(())
            }
        }
    }

    async fn upsert(&self, collection: &str, points: Vec<VectorPoint>) -> Result<()> {
        if points.is_empty() {
            return Ok(());
        }
        self.client.upsert_points(requests::upsert(&self.resolve(collection), points)).await.map_err(err)?;
        Ok(())
    }

    async fn delete(&self, collection: &str, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.client.delete_points(requests::delete_ids(&self.resolve(collection), ids)).await.map_err(err)?;
        Ok(())
    }

    async fn delete_matching(&self, collection: &str, conditions: &Conditions) -> Result<usize> {
        let Some(filter) = requests::filter(conditions) else {
            return Err(EngineError::Config("refusing to delete a whole collection with an empty filter".into()));
        };
        let alias = self.resolve(collection);
        let n = self
            .client
            .count(requests::count(&alias, Some(filter.clone())))
            .await
            .map_err(err)?
            .result
            .map(|r| r.count)
            .unwrap_or(0);
        if n > 0 {
            self.client.delete_points(requests::delete_filter(&alias, filter)).await.map_err(err)?;
        }
        Ok(n as usize)
    }

    async fn set_payload(&self, collection: &str, id: &str, payload: Map<String, Value>) -> Result<bool> {
        let alias = self.resolve(collection);
        let found = self
            .client
            .get_points(
                qdrant_client::qdrant::GetPointsBuilder::new(alias.clone(), vec![requests::point_id(id)])
                    .with_payload(false)
                    .build(),
            )
            .await
            .map_err(err)?;
        if found.result.is_empty() {
            return Ok(false);
        }
        self.client.set_payload(requests::set_payload(&alias, id, payload)).await.map_err(err)?;
        Ok(true)
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
        let r = self
            .client
            .query(requests::search(&self.resolve(collection), vector, k, conditions, self.hnsw_ef))
            .await
            .map_err(err)?;
        Ok(r.result
            .into_iter()
            .map(|p| {
                let payload = to_map(p.payload);
                VectorHit { id: id_of(&payload), score: p.score, payload }
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
        let q = requests::search_ids(&self.resolve(collection), vector, k, conditions, self.hnsw_ef);
        let r = self.client.query(q).await.map_err(err)?;
        Ok(r.result.into_iter().map(|p| (id_of(&to_map(p.payload)), p.score)).collect())
    }

    async fn retrieve(&self, collection: &str, ids: &[String]) -> Result<Vec<(String, Map<String, Value>)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let r = self.client.get_points(requests::get(&self.resolve(collection), ids)).await.map_err(err)?;
        let mut found: std::collections::HashMap<String, Map<String, Value>> = r
            .result
            .into_iter()
            .map(|p| {
                let payload = to_map(p.payload);
                (id_of(&payload), payload)
            })
            .collect();
        Ok(ids.iter().filter_map(|id| found.remove(id).map(|p| (id.clone(), p))).collect())
    }

    async fn scan(&self, collection: &str, fields: &[&str]) -> Result<Vec<(String, Map<String, Value>)>> {
        let alias = self.resolve(collection);
        let mut out = Vec::new();
        let mut offset = None;
        loop {
            let r = self.client.scroll(requests::scroll(&alias, fields, offset)).await.map_err(err)?;
            for p in r.result {
                let payload = to_map(p.payload);
                out.push((id_of(&payload), payload));
            }
            match r.next_page_offset {
                Some(o) => offset = Some(o),
                None => return Ok(out),
            }
        }
    }

    async fn count(&self, collection: &str) -> Result<usize> {
        let r = self.client.count(requests::count(&self.resolve(collection), None)).await.map_err(err)?;
        Ok(r.result.map(|c| c.count as usize).unwrap_or(0))
    }

    async fn begin_rebuild(&self, spec: &CollectionSpec) -> Result<String> {
        self.begin_rebuild_impl(spec).await
    }

    async fn commit_rebuild(&self, name: &str, staging: &str) -> Result<()> {
        self.commit_rebuild_impl(name, staging).await
    }

    async fn optimize(&self, _collection: &str) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::requests::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_versions() {
        assert_eq!(alias("tg", "apis"), "tg_apis");
        assert_eq!(physical("tg", "apis", 3), "tg_apis_v3");
        assert_eq!(version_of("tg", "apis", "tg_apis_v3"), Some(3));
        assert_eq!(version_of("tg", "apis", "tg_memory_v3"), None);
    }

    #[test]
    fn requests_carry_what_the_store_needs() {
        let c = create_collection("tg_apis_v1", 384);
        assert_eq!(c.collection_name, "tg_apis_v1");
        let params = match c.vectors_config.and_then(|v| v.config) {
            Some(qdrant_client::qdrant::vectors_config::Config::Params(p)) => p,
            other => panic!("unexpected vectors config {other:?}"),
        };
        assert_eq!((params.size, params.distance), (384, qdrant_client::qdrant::Distance::Cosine as i32));

        let idx = keyword_index("tg_apis_v1", "category");
        assert_eq!(
            (idx.field_name.as_str(), idx.field_type),
            ("category", Some(qdrant_client::qdrant::FieldType::Keyword as i32))
        );

        let payload = json!({"category": "data", "tool": "weather"}).as_object().unwrap().clone();
        let u = upsert("tg_apis", vec![VectorPoint { id: "data/weather/now".into(), vector: vec![0.6, 0.8], payload }]);
        assert_eq!(u.points.len(), 1);
        assert_eq!(u.wait, Some(true));
        let p = &u.points[0];
        assert_eq!(p.id, Some(point_id("data/weather/now")));
        let back = to_map(p.payload.clone());
        assert_eq!(back.get(ID_KEY), Some(&json!("data/weather/now")));
        assert_eq!(back.get("category"), Some(&json!("data")));

        let s = search(
            "tg_apis",
            &[0.6, 0.8],
            10,
            &Conditions::default().with("category", "data").with("status", "active"),
            128,
        );
        assert_eq!(s.limit, Some(10));
        assert_eq!(s.params.and_then(|p| p.hnsw_ef), Some(128));
        let must = s.filter.expect("filter").must;
        assert_eq!(must.len(), 2);
        let text = format!("{must:?}");
        assert!(
            text.contains("category") && text.contains("data") && text.contains("status") && text.contains("active"),
            "{text}"
        );
        assert!(search("tg_apis", &[1.0], 5, &Conditions::default(), 16).filter.is_none());

        let d = delete_ids("tg_apis", &["a".into(), "b".into()]);
        assert!(format!("{:?}", d.points).contains(&point_number("a").to_string()));
        let sp = set_payload("tg_apis", "a", json!({"status": "invalid", "id": "x"}).as_object().unwrap().clone());
        assert!(
            sp.payload.contains_key("status") && !sp.payload.contains_key(ID_KEY),
            "the id key is never overwritten"
        );
        let sc = scroll("tg_apis", &["text_hash"], None);
        assert!(format!("{:?}", sc.with_payload).contains("text_hash"));
        let si = search_ids("tg_memory", &[1.0], 5, &Conditions::default(), 16);
        assert!(format!("{:?}", si.with_payload).contains(ID_KEY) && si.limit == Some(5), "{:?}", si.with_payload);
        let g = get("tg_memory", &["mem-a".into(), "mem-b".into()]);
        assert_eq!(g.ids, vec![point_id("mem-a"), point_id("mem-b")]);
        assert!(format!("{:?}", g.with_payload).contains("Enable(true)"), "{:?}", g.with_payload);
    }

    #[test]
    fn connecting_needs_no_server_until_used() {
        // Building the client does not dial; a bad URL scheme is refused clearly.
        assert!(QdrantStore::connect("http://127.0.0.1:1", None, "tg", 64, Duration::from_millis(200)).is_ok());
    }
}
