//! The retriever the engine and the CLI use: BM25 (tantivy, in memory, built from the texts the
//! vector collection holds) fused with dense search in the vector store, filtered by category /
//! tool / status, with an optional graph prior.

use super::bm25::Bm25Index;
use super::fusion::{tool_boost, weighted};
use super::index::TEXT_KEY;
use super::usage::UsageVectors;
use super::{ApiText, Filter, Hit};
use crate::embed::Embedder;
use crate::vector::{Conditions, VectorStore, APIS};
use crate::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use toolgraph_schema::{slug, GraphSnapshot, RetrievalSettings, STATUS_ACTIVE};

/// Which ranking to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Lexical only.
    Bm25,
    /// Dense vectors only.
    Dense,
    #[default]
    /// Both, fused.
    Hybrid,
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "bm25" => Ok(Method::Bm25),
            "dense" => Ok(Method::Dense),
            "hybrid" => Ok(Method::Hybrid),
            _ => Err(format!("unknown method `{s}` (bm25, dense, hybrid)")),
        }
    }
}

/// Graph evidence for ranking: availability (successes / calls) of APIs seen in runs, and how
/// strongly each API follows the tools already chosen (blended NEXT weight).
#[derive(Debug, Clone, Default)]
pub struct GraphPrior {
    /// Per API: successes / calls.
    pub availability: HashMap<String, f64>,
    /// Per API: how often chains used it with others.
    pub co_usage: HashMap<String, f64>,
}

impl GraphPrior {
    /// From a graph snapshot and the APIs already chosen in this run.
    pub fn from_snapshot(g: &GraphSnapshot, chosen: &[String]) -> Self {
        let availability = g.apis.values().filter_map(|a| a.availability().map(|v| (a.id.clone(), v))).collect();
        let mut co_usage: HashMap<String, f64> = HashMap::new();
        for c in chosen {
            for s in g.successors(c, usize::MAX) {
                let e = co_usage.entry(s.id).or_default();
                *e = e.max(s.dynamic_weight);
            }
        }
        GraphPrior { availability, co_usage }
    }

    /// `score · (1 - λ/2 + λ/2 · availability) + λ · co_usage`; APIs never called keep their
    /// score (availability counts as 1), so the prior never buries unseen tools.
    pub fn apply(&self, hits: &mut [Hit], strength: f32) {
        let l = strength as f64;
        for h in hits.iter_mut() {
            let avail = self.availability.get(&h.id).copied().unwrap_or(1.0);
            let co = self.co_usage.get(&h.id).copied().unwrap_or(0.0);
            h.score = (h.score as f64 * (1.0 - l / 2.0 + l / 2.0 * avail) + l * co) as f32;
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    }
}

/// A ranked API with what a person needs to read the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RankedApi {
    /// The API's id.
    pub id: String,
    /// Its score (higher is nearer).
    pub score: f32,
    /// The API's name.
    pub name: String,
    /// Its tool.
    pub tool: String,
    /// Its category.
    pub category: String,
}

/// Finds the seed APIs of a (sub)task: lexical and dense search, fused, with a graph prior.
pub struct Retriever {
    bm25: Bm25Index,
    info: HashMap<String, RankedApi>,
    vectors: Arc<dyn VectorStore>,
    embedder: Arc<dyn Embedder>,
    collection: String,
    settings: RetrievalSettings,
    /// Usage vectors by API ([`UsageVectors`]).
    usage: UsageVectors,
}

fn str_of(p: &serde_json::Map<String, Value>, k: &str) -> String {
    p.get(k).and_then(Value::as_str).unwrap_or_default().to_string()
}

impl Retriever {
    /// Load the lexical index from the texts stored in `collection` (the `apis` collection by default).
    pub async fn load(
        vectors: Arc<dyn VectorStore>,
        embedder: Arc<dyn Embedder>,
        collection: Option<&str>,
        settings: RetrievalSettings,
    ) -> Result<Self> {
        let collection = collection.unwrap_or(APIS).to_string();
        let rows = vectors
            .scan(&collection, &[TEXT_KEY, "category", "tool", "status", "name", "tool_name", "category_name"])
            .await?;
        let mut docs = Vec::with_capacity(rows.len());
        let mut info = HashMap::with_capacity(rows.len());
        for (id, p) in rows {
            docs.push(ApiText {
                id: id.clone(),
                text: str_of(&p, TEXT_KEY),
                category: str_of(&p, "category"),
                tool: str_of(&p, "tool"),
                status: str_of(&p, "status"),
            });
            info.insert(
                id.clone(),
                RankedApi {
                    id,
                    score: 0.0,
                    name: str_of(&p, "name"),
                    tool: str_of(&p, "tool_name"),
                    category: str_of(&p, "category_name"),
                },
            );
        }
        let bm25 = tokio::task::spawn_blocking(move || Bm25Index::build(&docs))
            .await
            .map_err(|e| crate::EngineError::store("bm25", crate::ErrorClass::Permanent, e))??;
        let usage = UsageVectors::load(vectors.clone(), embedder.dim()).await?;
        Ok(Retriever { bm25, info, vectors, embedder, collection, settings, usage })
    }

    /// The configured weight of the usage vectors in hybrid search.
    pub fn usage_weight(&self) -> f32 {
        self.settings.usage_weight
    }

    /// Add `request`'s embedding to the usage vector of every API in `apis` (an answered chain).
    pub async fn add_usage(&self, apis: &[String], request: &[f32]) -> Result<()> {
        if request.is_empty() {
            return Ok(());
        }
        self.usage.add(&[(apis, request)]).await
    }

    /// How many APIs it indexes.
    pub fn len(&self) -> usize {
        self.info.len()
    }
    /// Whether it indexes none.
    pub fn is_empty(&self) -> bool {
        self.info.is_empty()
    }
    /// The embedder of its queries.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// Filter values normalized like the payloads (slugs); status defaults to active.
    fn normalized(filter: &Filter) -> Filter {
        Filter {
            category: filter.category.as_deref().map(slug),
            tool: filter.tool.as_deref().map(slug),
            status: Some(filter.status.clone().unwrap_or_else(|| STATUS_ACTIVE.to_string())),
        }
    }

    /// Top-`k` APIs for `query`; embeds the query.
    pub async fn search(
        &self,
        query: &str,
        k: usize,
        filter: &Filter,
        method: Method,
        prior: Option<&GraphPrior>,
    ) -> Result<Vec<RankedApi>> {
        let vector = if method == Method::Bm25 {
            Vec::new()
        } else {
            self.embedder.embed(vec![query.to_string()]).await?.pop().unwrap_or_default()
        };
        self.search_with_vector(query, &vector, k, filter, method, prior).await
    }

    /// Top-`k` APIs for `query` whose embedding is `vector` (in-process search only: this is the
    /// part the latency budget covers).
    pub async fn search_with_vector(
        &self,
        query: &str,
        vector: &[f32],
        k: usize,
        filter: &Filter,
        method: Method,
        prior: Option<&GraphPrior>,
    ) -> Result<Vec<RankedApi>> {
        self.search_with_usage(query, vector, k, filter, method, prior, self.settings.usage_weight).await
    }

    /// [`Self::search_with_vector`] with the usage vectors' weight given (0: plain hybrid).
    #[allow(clippy::too_many_arguments)]
    pub async fn search_with_usage(
        &self,
        query: &str,
        vector: &[f32],
        k: usize,
        filter: &Filter,
        method: Method,
        prior: Option<&GraphPrior>,
        usage_weight: f32,
    ) -> Result<Vec<RankedApi>> {
        let f = Self::normalized(filter);
        let n = self.settings.candidates.max(k);
        let lexical = if method == Method::Dense { Vec::new() } else { self.bm25.search(query, n, &f)? };
        let dense: Vec<Hit> = if method == Method::Bm25 {
            Vec::new()
        } else {
            let mut c = Conditions::default();
            for (field, v) in [("category", &f.category), ("tool", &f.tool), ("status", &f.status)] {
                if let Some(v) = v {
                    c = c.with(field, v);
                }
            }
            self.vectors
                .search_ids(&self.collection, vector, n, &c)
                .await?
                .into_iter()
                .map(|(id, score)| Hit { id, score })
                .collect()
        };
        let mut hits = match method {
            Method::Bm25 => lexical,
            Method::Dense => dense,
            Method::Hybrid => {
                let mut fused = weighted(&lexical, &dense, n, self.settings.lexical_weight);
                if usage_weight > 0.0 && !vector.is_empty() {
                    // Candidates whose usage vector is near the request gain up to usage_weight ×
                    // the best fused score (cosine to the usage mean, max-normalized over the
                    // candidates; computed in memory: the candidates are few).
                    if !self.usage.is_empty() {
                        let sims = self.usage.similarities(fused.iter().map(|h| h.id.as_str()), vector);
                        let best = sims.iter().copied().fold(0.0f32, f32::max);
                        let top = fused.first().map(|h| h.score).unwrap_or(1.0);
                        if best > 0.0 {
                            for (h, s) in fused.iter_mut().zip(sims) {
                                h.score += usage_weight * top * s / best;
                            }
                            fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
                        }
                    }
                }
                tool_boost(&mut fused, |id| self.info.get(id).map(|r| r.tool.as_str()), self.settings.tool_boost);
                fused
            }
        };
        if let Some(p) = prior {
            p.apply(&mut hits, self.settings.graph_prior);
        }
        hits.truncate(k);
        Ok(hits
            .into_iter()
            .map(|h| {
                let mut r = self.info.get(&h.id).cloned().unwrap_or(RankedApi {
                    id: h.id.clone(),
                    score: 0.0,
                    name: String::new(),
                    tool: String::new(),
                    category: String::new(),
                });
                r.score = h.score;
                r
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prior_rewards_co_usage_and_penalizes_failing_apis() {
        let h = |id: &str, s: f32| Hit { id: id.into(), score: s };
        let mut hits = vec![h("a", 0.9), h("b", 0.8), h("c", 0.7)];
        let p = GraphPrior {
            availability: [("a".to_string(), 0.0)].into_iter().collect(),
            co_usage: [("c".to_string(), 1.0)].into_iter().collect(),
        };
        p.apply(&mut hits, 0.3);
        // c: 0.7 + 0.3 = 1.0; b unchanged 0.8; a: 0.9 · 0.85 = 0.765
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["c", "b", "a"]);
        assert!((hits[2].score - 0.765).abs() < 1e-6);
        let mut same = vec![h("a", 0.9)];
        GraphPrior::default().apply(&mut same, 0.3);
        assert!((same[0].score - 0.9).abs() < 1e-6, "no evidence, no change");
    }
}
