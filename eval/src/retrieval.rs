//! `toolgraph eval retrieval`: seed-tool retrieval measured on ToolBench / StableToolBench query
//! files. Corpus: every API of the tool docs plus those the query files list, deduplicated by
//! normalized tool + API name. Relevant set: each query's `relevant APIs`. Methods: `bm25`,
//! `dense` (the vector store's HNSW search; its recall@10 against exact search is reported) and
//! `hybrid` (max-normalized weighted fusion of both), plus `hybrid+graph` (the graph prior over
//! hybrid) when a graph is given, all measured in one run on the same corpus.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::retrieval::bm25::Bm25Index;
use toolgraph_engine::retrieval::cache::EmbeddingCache;
use toolgraph_engine::retrieval::exact::ExactIndex;
use toolgraph_engine::retrieval::fusion::{tool_boost, weighted};
use toolgraph_engine::retrieval::hybrid::GraphPrior;
use toolgraph_engine::retrieval::index::{sync_collection, IndexDoc, SyncReport};
use toolgraph_engine::retrieval::metrics::{ndcg_at, quantile, recall_at};
use toolgraph_engine::retrieval::{api_text, ApiText, Filter, Hit};
use toolgraph_engine::vector::{CollectionSpec, Conditions, VectorStore};
use toolgraph_ingest::catalog::{self, Catalog};
use toolgraph_ingest::error::RecordError;
use toolgraph_ingest::read;
use toolgraph_schema::slug;

pub const METHODS: [&str; 4] = ["bm25", "dense", "hybrid", "hybrid+graph"];
/// Candidates each method's list contributes before fusion.
pub const CANDIDATES: usize = 100;
/// The vector collection the evaluation corpus lives in (its ids are normalized names, not
/// graph ids, so it is kept apart from the `apis` collection).
pub const EVAL_COLLECTION: &str = "eval_apis";
/// Recall@k is reported for k = 1..=K_MAX.
pub const K_MAX: usize = 20;

/// A query with the APIs that answer it.
#[derive(Debug, Clone)]
pub struct EvalQuery {
    pub group: String,
    pub text: String,
    /// Normalized `slug(tool)/slug(api)` keys.
    pub relevant: HashSet<String>,
}

#[derive(Deserialize)]
struct RawEvalQuery {
    query: String,
    #[serde(rename = "relevant APIs", default)]
    relevant: Vec<Vec<String>>,
}

pub fn key(tool: &str, api: &str) -> String {
    format!("{}/{}", slug(tool), slug(api))
}

/// Queries of one file; the group is the file name without extension (`G1_instruction`).
pub fn load_queries(path: &Path) -> Result<Vec<EvalQuery>, RecordError> {
    let bytes = read::read_document(path, 1 << 30)?;
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    let raw: Vec<RawEvalQuery> =
        serde_path_to_error::deserialize(de).map_err(|e| RecordError::from_path_error(path, "file", e))?;
    let group = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(raw
        .into_iter()
        .map(|q| EvalQuery {
            group: group.clone(),
            text: q.query,
            relevant: q.relevant.iter().filter(|p| p.len() >= 2).map(|p| key(&p[0], &p[1])).collect(),
        })
        .collect())
}

/// The evaluation corpus: one text per normalized tool + API name.
pub fn corpus(c: &Catalog) -> Vec<ApiText> {
    let mut by_key: BTreeMap<String, ApiText> = BTreeMap::new();
    for d in c.apis() {
        let k = key(&d.tool, &d.api);
        by_key.entry(k.clone()).or_insert_with(|| {
            let params: Vec<&str> = d.params.iter().map(|p| p.name.as_str()).collect();
            ApiText {
                id: k,
                text: api_text(&d.tool, &d.tool_description, &d.api, &d.description, &params),
                category: d.category.clone(),
                tool: d.tool.clone(),
                status: "active".into(),
            }
        });
    }
    by_key.into_values().collect()
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct MethodScores {
    pub queries: usize,
    pub ndcg_at_1: f64,
    pub ndcg_at_5: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    /// Recall@k for k = 1..=20.
    pub recall_curve: Vec<f64>,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RetrievalReport {
    pub corpus_apis: usize,
    pub queries: usize,
    /// Queries none of whose relevant APIs is in the corpus (skipped).
    pub queries_without_relevant_in_corpus: usize,
    pub model: String,
    pub corpus_embedded_now: usize,
    pub corpus_embedding_sentences_per_s: Option<f64>,
    pub query_embedding_ms_p50: f64,
    /// The vector store serving `dense` and its recall@10 against exact search.
    pub vector_backend: String,
    pub dense_recall_at_10_vs_exact: f64,
    pub index: SyncReport,
    pub lexical_weight: f32,
    #[serde(default)]
    pub tool_boost: f32,
    /// group → method → scores; group `all` averages every query.
    pub groups: BTreeMap<String, BTreeMap<String, MethodScores>>,
    pub elapsed_s: f64,
}

#[derive(Default)]
struct Acc {
    ndcg1: Vec<f64>,
    ndcg5: Vec<f64>,
    curve: Vec<Vec<f64>>,
    latency: Vec<f64>,
}

impl Acc {
    fn add(&mut self, ranked: &[String], rel: &HashSet<String>, ms: f64) {
        self.ndcg1.push(ndcg_at(ranked, rel, 1));
        self.ndcg5.push(ndcg_at(ranked, rel, 5));
        self.curve.push((1..=K_MAX).map(|k| recall_at(ranked, rel, k)).collect());
        self.latency.push(ms);
    }
    fn scores(&self) -> MethodScores {
        let n = self.ndcg1.len().max(1) as f64;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / n;
        let curve: Vec<f64> = (0..K_MAX).map(|k| self.curve.iter().map(|c| c[k]).sum::<f64>() / n).collect();
        MethodScores {
            queries: self.ndcg1.len(),
            ndcg_at_1: mean(&self.ndcg1),
            ndcg_at_5: mean(&self.ndcg5),
            recall_at_5: curve[4],
            recall_at_10: curve[9],
            recall_curve: curve,
            latency_ms_p50: quantile(&self.latency, 0.5),
            latency_ms_p99: quantile(&self.latency, 0.99),
        }
    }
}

fn ids(hits: &[Hit]) -> Vec<String> {
    hits.iter().map(|h| h.id.clone()).collect()
}

/// How `hybrid` fuses, and the graph (with the prior's strength) for `hybrid+graph`.
pub struct EvalOptions<'a> {
    pub lexical_weight: f32,
    /// `retrieval.tool_boost` (sibling boost after fusion).
    pub tool_boost: f32,
    pub graph: Option<(&'a toolgraph_schema::GraphSnapshot, f32)>,
}

/// The tool docs and the labelled queries (a query file that does not load is an error).
fn load(
    tools: &[PathBuf],
    query_files: &[PathBuf],
) -> Result<(Catalog, Vec<EvalQuery>), toolgraph_ingest::IngestError> {
    let mut cat = Catalog::default();
    for t in tools {
        let l = catalog::load_tools(&mut cat, t, 1 << 26);
        if let Some(e) = l.errors.first() {
            tracing::warn!("{} tool-doc records skipped, first: {e}", l.errors.len());
        }
    }
    let mut queries = Vec::new();
    for q in query_files {
        let l = catalog::load_queries(&mut cat, q, 1 << 30);
        if let Some(e) = l.errors.first() {
            return Err(toolgraph_ingest::IngestError::Input(e.to_string()));
        }
        queries.extend(load_queries(q).map_err(|e| toolgraph_ingest::IngestError::Input(e.to_string()))?);
    }
    Ok((cat, queries))
}

/// The graph prior keyed like the corpus (normalized tool + API names); no chosen tools yet at
/// seed time, so only availability applies.
fn graph_prior(g: &toolgraph_schema::GraphSnapshot) -> GraphPrior {
    let mut p = GraphPrior::default();
    for a in g.apis.values() {
        if let Some(av) = a.availability() {
            let tool = g.tools.get(&a.tool).map(|t| t.name.clone()).unwrap_or_else(|| a.tool.clone());
            p.availability.insert(key(&tool, &a.name), av);
        }
    }
    p
}

/// Run the evaluation. `cache` keeps corpus embeddings between runs; `progress` gets (embedded,
/// to embed) while the corpus is embedded.
pub async fn run(
    tools: &[PathBuf],
    query_files: &[PathBuf],
    embedder: Arc<dyn Embedder>,
    cache: &EmbeddingCache,
    vectors: &dyn VectorStore,
    options: EvalOptions<'_>,
    progress: impl FnMut(usize, usize),
) -> Result<RetrievalReport, toolgraph_ingest::IngestError> {
    let EvalOptions { lexical_weight, tool_boost: boost, graph } = options;
    let started = Instant::now();
    let (cat, mut queries) = load(tools, query_files)?;
    let docs = corpus(&cat);
    let in_corpus: HashSet<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    let total_queries = queries.len();
    queries.retain(|q| q.relevant.iter().any(|r| in_corpus.contains(r.as_str())));
    let skipped = total_queries - queries.len();

    let texts: Vec<String> = docs.iter().map(|d| d.text.clone()).collect();
    let t = Instant::now();
    let (corpus_vectors, embedded_now) = cache.embed_all(embedder.as_ref(), &texts, 1024, progress).await?;
    let corpus_rate = (embedded_now > 0).then(|| embedded_now as f64 / t.elapsed().as_secs_f64());

    let index_docs: Vec<IndexDoc> = docs
        .iter()
        .map(|d| {
            let mut payload = serde_json::Map::new();
            payload.insert("category".into(), slug(&d.category).into());
            payload.insert("tool".into(), slug(&d.tool).into());
            payload.insert("status".into(), d.status.clone().into());
            IndexDoc { id: d.id.clone(), text: d.text.clone(), payload }
        })
        .collect();
    let spec = CollectionSpec::new(EVAL_COLLECTION, embedder.dim(), &["category", "tool", "status"]);
    let index = sync_collection(vectors, &spec, index_docs, embedder.as_ref(), Some(cache), 1024, |_, _| {}).await?;

    let bm25 = Bm25Index::build(&docs)?;
    let tool_of: HashMap<&str, &str> = docs.iter().map(|d| (d.id.as_str(), d.tool.as_str())).collect();
    let hybrid = |b: &[Hit], d: &[Hit], k: usize| {
        let mut fused = weighted(b, d, CANDIDATES, lexical_weight);
        tool_boost(&mut fused, |id| tool_of.get(id).copied(), boost);
        fused.truncate(k);
        fused
    };
    let exact = ExactIndex::new(docs.clone(), &corpus_vectors);
    let mut hnsw_recall = Vec::new();
    let prior = graph.map(|(g, strength)| (graph_prior(g), strength));
    // Warm-up (page in the index files, fill caches): latencies are steady-state, like a daemon's.
    for q in queries.iter().take(20) {
        let v = embedder.embed(vec![q.text.clone()]).await?;
        bm25.search(&q.text, CANDIDATES, &Filter::default())?;
        vectors.search(EVAL_COLLECTION, &v[0], CANDIDATES, &Conditions::default()).await?;
    }
    let mut q_embed_ms = Vec::new();
    let mut acc: BTreeMap<(String, &str), Acc> = BTreeMap::new();
    let filter = Filter::default();
    for chunk in queries.chunks(64) {
        let t = Instant::now();
        let qv = embedder.embed(chunk.iter().map(|q| q.text.clone()).collect()).await?;
        let per = t.elapsed().as_secs_f64() * 1000.0 / chunk.len() as f64;
        for (q, v) in chunk.iter().zip(&qv) {
            q_embed_ms.push(per);
            let t = Instant::now();
            let b = bm25.search(&q.text, CANDIDATES, &filter)?;
            let b_ms = t.elapsed().as_secs_f64() * 1000.0;
            let t = Instant::now();
            let d: Vec<Hit> = vectors
                .search(EVAL_COLLECTION, v, CANDIDATES, &Conditions::default())
                .await?
                .into_iter()
                .map(|h| Hit { id: h.id, score: h.score })
                .collect();
            let d_ms = t.elapsed().as_secs_f64() * 1000.0;
            let t = Instant::now();
            let h = hybrid(&b, &d, K_MAX);
            let h_ms = b_ms + d_ms + t.elapsed().as_secs_f64() * 1000.0;
            let truth: HashSet<String> = ids(&exact.search(v, 10, &filter)).into_iter().collect();
            hnsw_recall.push(recall_at(&ids(&d), &truth, 10));
            let hg = prior.as_ref().map(|(p, strength)| {
                let t = Instant::now();
                let mut fused = hybrid(&b, &d, CANDIDATES);
                p.apply(&mut fused, *strength);
                fused.truncate(K_MAX);
                (fused, b_ms + d_ms + t.elapsed().as_secs_f64() * 1000.0)
            });
            for group in [q.group.clone(), "all".to_string()] {
                if let Some((hg, ms)) = &hg {
                    acc.entry((group.clone(), "hybrid+graph")).or_default().add(&ids(hg), &q.relevant, *ms);
                }
                acc.entry((group.clone(), "bm25")).or_default().add(&ids(&b), &q.relevant, b_ms);
                acc.entry((group.clone(), "dense")).or_default().add(&ids(&d), &q.relevant, d_ms);
                acc.entry((group, "hybrid")).or_default().add(&ids(&h), &q.relevant, h_ms);
            }
        }
    }
    let mut groups: BTreeMap<String, BTreeMap<String, MethodScores>> = BTreeMap::new();
    for ((group, method), a) in acc {
        groups.entry(group).or_default().insert(method.to_string(), a.scores());
    }
    Ok(RetrievalReport {
        corpus_apis: docs.len(),
        queries: queries.len(),
        queries_without_relevant_in_corpus: skipped,
        model: embedder.model().to_string(),
        corpus_embedded_now: embedded_now,
        corpus_embedding_sentences_per_s: corpus_rate,
        query_embedding_ms_p50: quantile(&q_embed_ms, 0.5),
        vector_backend: vectors.backend().to_string(),
        dense_recall_at_10_vs_exact: hnsw_recall.iter().sum::<f64>() / hnsw_recall.len().max(1) as f64,
        index,
        lexical_weight,
        tool_boost: boost,
        groups,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// The report as a markdown table (NDCG and recall ×100, latency in ms).
pub fn markdown(r: &RetrievalReport) -> String {
    let mut s = format!(
        "Corpus {} APIs, {} queries ({} without a relevant API in the corpus skipped), model {}.\n\n\
         | group | method | NDCG@1 | NDCG@5 | Recall@5 | Recall@10 | p50 ms | p99 ms |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
        r.corpus_apis, r.queries, r.queries_without_relevant_in_corpus, r.model
    );
    for (group, methods) in &r.groups {
        for m in METHODS {
            if let Some(x) = methods.get(m) {
                s.push_str(&format!(
                    "| {group} | {m} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |\n",
                    100.0 * x.ndcg_at_1,
                    100.0 * x.ndcg_at_5,
                    100.0 * x.recall_at_5,
                    100.0 * x.recall_at_10,
                    x.latency_ms_p50,
                    x.latency_ms_p99
                ));
            }
        }
    }
    s.push_str(&format!(
        "\n`dense` searches {} (recall@10 against exact search {:.3}); `hybrid` = {:.1}·BM25 + {:.1}·dense, each max-normalized, over {} candidates per list, then each candidate + {:.1} × the best fused score of its tool.\n",
        r.vector_backend, r.dense_recall_at_10_vs_exact, r.lexical_weight, 1.0 - r.lexical_weight, CANDIDATES, r.tool_boost
    ));
    s.push_str(&format!(
        "Query embedding p50: {:.2} ms per query (excluded from the latencies above).\n",
        r.query_embedding_ms_p50
    ));
    if let Some(rate) = r.corpus_embedding_sentences_per_s {
        s.push_str(&format!("Corpus embedding: {} texts at {rate:.0} sentences/s.\n", r.corpus_embedded_now));
    }
    s
}

/// Recall@k for k = 1..=20 per method (group `all`) as an SVG line chart.
pub fn recall_svg(r: &RetrievalReport) -> String {
    let (w, h, left, right, top, bottom) = (640.0, 400.0, 60.0, 150.0, 30.0, 50.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let x = |k: usize| left + pw * (k as f64 - 1.0) / (K_MAX as f64 - 1.0);
    let y = |v: f64| top + ph * (1.0 - v);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">Recall@k, all queries ({} queries, {} APIs)</text>\n",
        left + pw / 2.0, r.queries, r.corpus_apis
    );
    for i in 0..=5 {
        let v = i as f64 / 5.0;
        s.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y0}\" y2=\"{y0}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{v:.1}</text>\n",
            left + pw, left - 6.0, y(v) + 4.0, y0 = y(v)
        ));
    }
    for k in [1, 5, 10, 15, 20] {
        s.push_str(&format!("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{k}</text>\n", x(k), top + ph + 18.0));
    }
    s.push_str(&format!("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">k</text>\n", left + pw / 2.0, h - 10.0));
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
    if let Some(all) = r.groups.get("all") {
        for (i, m) in METHODS.iter().enumerate() {
            if let Some(ms) = all.get(*m) {
                let pts: Vec<String> =
                    ms.recall_curve.iter().enumerate().map(|(k, v)| format!("{:.1},{:.1}", x(k + 1), y(*v))).collect();
                s.push_str(&format!(
                    "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                    colors[i],
                    pts.join(" ")
                ));
                let ly = top + 20.0 + 20.0 * i as f64;
                s.push_str(&format!(
                    "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{m}</text>\n",
                    left + pw + 15.0, left + pw + 40.0, colors[i], left + pw + 46.0, ly + 4.0
                ));
            }
        }
    }
    s.push_str("</svg>\n");
    s
}
