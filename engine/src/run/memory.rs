//! Long-term memory (thesis §4.4.4): judged-good (request → chain) pairs in the vector store's
//! `memory` collection. The same request replaces its old entry; invalidating an API deletes the
//! entries that use it; a new request recalls the nearest entries.

use crate::exec::refs::Reference;
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
    let norm: String = crate::plan::reading::squash(request).to_lowercase();
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
        payload.insert(
            "chain".into(),
            Value::String(
                serde_json::to_string(&entry.chain)
                    .map_err(|e| EngineError::store("memory", ErrorClass::Permanent, e))?,
            ),
        );
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

/// One call of a recorded chain, as [`recorded_steps`] reads it: the API id, its label
/// (`var1`…), the arguments as sent and the response it got.
pub struct RecordedCall<'a> {
    pub api: &'a str,
    pub label: &'a str,
    pub arguments: &'a Map<String, Value>,
    pub response: Option<&'a Value>,
}

/// Memory steps of a recorded chain, with where each value came from made explicit: a literal
/// the request never says but an earlier call's response holds (an id, coordinates, a name the
/// annotator copied from a result) becomes a reference to that field (`$var3.result.1.hotel_id$`,
/// indexes kept), wherever it stands — inside arrays and objects too. What the request says stays
/// literal (the replay maps it to the new request's mention).
pub fn recorded_steps(request: &str, calls: &[RecordedCall<'_>]) -> Vec<MemoryStep> {
    let said = request.to_lowercase();
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let earlier = &calls[..i];
            let arguments: Map<String, Value> =
                c.arguments.iter().map(|(k, v)| (k.clone(), provenance(v, &said, earlier))).collect();
            let sources = arguments
                .iter()
                .map(|(k, v)| {
                    (k.clone(), ArgSource::of_reference(v).unwrap_or(ArgSource::Request { kind: "recorded".into() }))
                })
                .collect();
            MemoryStep { api: c.api.to_string(), arguments, sources }
        })
        .collect()
}

/// The literal's text if it is worth tracing to an earlier output: a string of three or more
/// characters, or a number that is not a small count; neither said in the request.
fn traceable(v: &Value, said: &str) -> Option<String> {
    let text = match v {
        Value::String(s) if s.trim().chars().count() >= 3 && !crate::exec::refs::holds_reference(s) => {
            s.trim().to_string()
        }
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() != 0.0 || f.abs() >= 100.0) => n.to_string(),
        _ => return None,
    };
    (!said.contains(&text.to_lowercase())).then_some(text)
}

fn provenance(v: &Value, said: &str, earlier: &[RecordedCall<'_>]) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(|x| provenance(x, said, earlier)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), provenance(x, said, earlier))).collect()),
        _ => {
            let Some(text) = traceable(v, said) else { return v.clone() };
            // The most recent producer first, its shallowest field holding the value.
            earlier
                .iter()
                .rev()
                .find_map(|c| field_holding(c.response?, &text).map(|path| Reference::new(c.label, path).into()))
                .unwrap_or_else(|| v.clone())
        }
    }
}

/// The path (keys and indexes, dot-separated) of the first scalar equal to `text`, breadth first.
fn field_holding(response: &Value, text: &str) -> Option<String> {
    let mut queue: std::collections::VecDeque<(&Value, String)> =
        std::collections::VecDeque::from([(response, String::new())]);
    let mut seen = 0;
    let join = |p: &str, k: &str| if p.is_empty() { k.to_string() } else { format!("{p}.{k}") };
    while let Some((node, path)) = queue.pop_front() {
        seen += 1;
        if seen > 20_000 {
            return None;
        }
        match node {
            Value::Object(m) => m.iter().for_each(|(k, x)| queue.push_back((x, join(&path, k)))),
            Value::Array(items) => {
                items.iter().enumerate().for_each(|(i, x)| queue.push_back((x, join(&path, &i.to_string()))))
            }
            Value::String(s) if s.trim() == text => return Some(path),
            Value::Number(n)
                if n.to_string() == text || n.as_f64().zip(text.parse::<f64>().ok()).is_some_and(|(a, b)| a == b) =>
            {
                return Some(path)
            }
            _ => {}
        }
    }
    None
}
