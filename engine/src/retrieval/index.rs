//! Keeping a vector collection in step with a set of texts: only new or changed texts are
//! embedded (and, with a cache, only texts never embedded before by this model), removed ids are
//! deleted, payload-only changes are written without re-embedding.

use super::cache::EmbeddingCache;
use crate::embed::Embedder;
use crate::graph::GraphStore;
use crate::vector::{text_hash, CollectionSpec, VectorPoint, VectorStore, APIS};
use crate::Result;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::time::Instant;
use toolgraph_schema::{slug, ApiNode, GraphSnapshot};

/// Payload key of the indexed text and of its hash.
pub const TEXT_KEY: &str = "text";
/// The payload field that holds a document's text hash (unchanged texts are not embedded again).
pub const HASH_KEY: &str = "text_hash";

/// The documents to index for a graph: one per API, text = tool name + tool description +
/// API name + API description + parameter names; payload = filter fields (slugs) and names.
pub fn graph_docs(g: &GraphSnapshot) -> Vec<IndexDoc> {
    g.apis
        .values()
        .map(|a| {
            // ApiNode.tool / .category hold ids (`category/tool`, `category`); names come from their nodes.
            let tool = g.tools.get(&a.tool);
            let tool_name = tool
                .map(|t| t.name.clone())
                .unwrap_or_else(|| a.tool.rsplit('/').next().unwrap_or_default().to_string());
            let category_name =
                g.categories.get(&a.category).map(|c| c.name.clone()).unwrap_or_else(|| a.category.clone());
            let params = param_names(a);
            let refs: Vec<&str> = params.iter().map(String::as_str).collect();
            let text = super::api_text(
                &tool_name,
                tool.map(|t| t.description.as_str()).unwrap_or(""),
                &a.name,
                &a.description,
                &refs,
            );
            let mut payload = serde_json::Map::new();
            payload.insert("category".into(), slug(&category_name).into());
            payload.insert("tool".into(), slug(&tool_name).into());
            payload.insert("status".into(), a.status.clone().into());
            payload.insert("name".into(), a.name.clone().into());
            payload.insert("tool_name".into(), tool_name.into());
            payload.insert("category_name".into(), category_name.into());
            IndexDoc { id: a.id.clone(), text, payload }
        })
        .collect()
}

fn param_names(a: &ApiNode) -> Vec<String> {
    serde_json::from_str::<Vec<Value>>(&a.parameters)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// One text to index with its payload (filter fields, display fields).
#[derive(Debug, Clone)]
pub struct IndexDoc {
    /// The API's id.
    pub id: String,
    /// The text embedded.
    pub text: String,
    /// The payload stored with it.
    pub payload: Map<String, Value>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
/// What a sync of the API index did.
pub struct SyncReport {
    /// The collection synced.
    pub collection: String,
    /// Documents in the index after it.
    pub documents: usize,
    /// Points written with a new vector (new or changed text).
    pub embedded: usize,
    /// Of those, vectors computed now (the rest came from the embedding cache).
    pub embedded_by_model: usize,
    /// Points whose payload changed but text did not.
    pub payload_updated: usize,
    /// Documents whose text had not changed.
    pub unchanged: usize,
    /// Documents removed.
    pub deleted: usize,
    /// How long it took.
    pub seconds: f64,
    /// Embedding throughput of this run (texts the model embedded per second).
    pub sentences_per_s: Option<f64>,
}

/// Make `spec.name` hold exactly `docs`. Embeds in chunks of `chunk` and writes each chunk as it is
/// done, so an interrupted sync keeps its progress; `progress(done, total)` after each chunk.
pub async fn sync_collection(
    store: &dyn VectorStore,
    spec: &CollectionSpec,
    docs: Vec<IndexDoc>,
    embedder: &dyn Embedder,
    cache: Option<&EmbeddingCache>,
    chunk: usize,
    mut progress: impl FnMut(usize, usize),
) -> Result<SyncReport> {
    let started = Instant::now();
    store.ensure(spec).await?;
    let fields: Vec<&str> = docs.first().map(|d| d.payload.keys().map(String::as_str).collect()).unwrap_or_default();
    let mut wanted_fields = fields.clone();
    wanted_fields.push(HASH_KEY);
    let existing: HashMap<String, Map<String, Value>> =
        store.scan(&spec.name, &wanted_fields).await?.into_iter().collect();
    let mut report = SyncReport { collection: spec.name.clone(), documents: docs.len(), ..Default::default() };

    let mut to_embed: Vec<IndexDoc> = Vec::new();
    let mut keep: std::collections::HashSet<String> = std::collections::HashSet::with_capacity(docs.len());
    for mut doc in docs {
        let hash = text_hash(&doc.text);
        doc.payload.insert(TEXT_KEY.into(), Value::String(doc.text.clone()));
        doc.payload.insert(HASH_KEY.into(), Value::String(hash.clone()));
        keep.insert(doc.id.clone());
        match existing.get(&doc.id) {
            Some(old) if old.get(HASH_KEY).and_then(Value::as_str) == Some(hash.as_str()) => {
                let changed: Map<String, Value> = doc
                    .payload
                    .iter()
                    .filter(|(k, v)| k.as_str() != TEXT_KEY && old.get(*k) != Some(*v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if changed.is_empty() {
                    report.unchanged += 1;
                } else {
                    store.set_payload(&spec.name, &doc.id, changed).await?;
                    report.payload_updated += 1;
                }
            }
            _ => to_embed.push(doc),
        }
    }
    let gone: Vec<String> = existing.keys().filter(|id| !keep.contains(*id)).cloned().collect();
    if !gone.is_empty() {
        store.delete(&spec.name, &gone).await?;
        report.deleted = gone.len();
    }

    let total = to_embed.len();
    let mut model_seconds = 0.0;
    for part in to_embed.chunks(chunk.max(1)) {
        let texts: Vec<String> = part.iter().map(|d| d.text.clone()).collect();
        let t = Instant::now();
        let vectors = match cache {
            Some(c) => {
                let (v, now) = c.embed_all(embedder, &texts, texts.len(), |_, _| {}).await?;
                report.embedded_by_model += now;
                v
            }
            None => {
                report.embedded_by_model += texts.len();
                embedder.embed(texts).await?
            }
        };
        model_seconds += t.elapsed().as_secs_f64();
        let points = part
            .iter()
            .zip(vectors)
            .map(|(d, vector)| VectorPoint { id: d.id.clone(), vector, payload: d.payload.clone() })
            .collect();
        store.upsert(&spec.name, points).await?;
        report.embedded += part.len();
        progress(report.embedded, total);
    }
    if report.embedded > 0 || report.deleted > 0 {
        store.optimize(&spec.name).await?;
    }
    report.sentences_per_s =
        (report.embedded_by_model > 0 && model_seconds > 0.0).then(|| report.embedded_by_model as f64 / model_seconds);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Fields of the `apis` collection that filters use (payload-indexed).
pub const API_FILTER_FIELDS: [&str; 3] = ["category", "tool", "status"];

/// Index every API of the graph into the `apis` collection (incremental, or a full rebuild into
/// a staging collection that replaces the live one at the end).
pub async fn index_graph(
    graph: &dyn GraphStore,
    vectors: &dyn VectorStore,
    embedder: &dyn Embedder,
    cache: Option<&EmbeddingCache>,
    chunk: usize,
    rebuild: bool,
    progress: impl FnMut(usize, usize),
) -> Result<SyncReport> {
    let g = graph.node_snapshot().await?;
    let docs = graph_docs(&g);
    let spec = CollectionSpec::new(APIS, embedder.dim(), &API_FILTER_FIELDS);
    if !rebuild {
        return sync_collection(vectors, &spec, docs, embedder, cache, chunk, progress).await;
    }
    let staging = vectors.begin_rebuild(&spec).await?;
    let staged = CollectionSpec { name: staging.clone(), ..spec };
    let report = sync_collection(vectors, &staged, docs, embedder, cache, chunk, progress).await?;
    vectors.commit_rebuild(APIS, &staging).await?;
    Ok(SyncReport { collection: APIS.to_string(), ..report })
}
