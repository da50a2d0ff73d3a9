//! Learning a fold: the training chains ingested into fresh stores (graph, API vectors, usage
//! vectors, long-term memory).

use serde_json::Map;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::Executor;
use toolgraph_engine::retrieval::cache::EmbeddingCache;
use toolgraph_engine::retrieval::hybrid::Retriever;
use toolgraph_engine::run::{recorded_steps, RecordedCall};
use toolgraph_engine::stack::Stack;
use toolgraph_ingest::complexfuncbench::{run_of_chain, tool_of_host, tools_lines, Chain, Spec};
use toolgraph_ingest::pipeline::{Inputs, NoProgress};
use toolgraph_schema::Settings;

/// The category ComplexFuncBench APIs are filed under.
pub const CATEGORY: &str = "Travel";

/// What [`learn`] built: the fold's [`Stack`] (its stores, learned) and the retriever over its
/// API index.
pub struct Learned {
    pub stack: Stack,
    pub retriever: Arc<Retriever>,
}

impl Learned {
    /// The fold's stores under `settings` (a caller's run, server or LLM choices), calls sent
    /// through `executor` (the fold's replay) and `planner` deciding.
    pub fn stack(
        &self,
        settings: &Settings,
        executor: Executor,
        planner: Arc<dyn toolgraph_engine::plan::Planner>,
    ) -> Stack {
        Stack { settings: settings.clone(), executor, planner, ..self.stack.clone() }
    }
}

/// Learn from `train` into fresh stores under `dir`: graph (ingest), API vectors, memories.
pub async fn learn(
    dir: &Path,
    train: &[&Chain],
    specs: &[Spec],
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    cache: Option<Arc<EmbeddingCache>>,
) -> Result<Learned, toolgraph_ingest::IngestError> {
    learn_in(dir, train, specs, CATEGORY, settings, embedder, cache).await
}

/// [`learn`] with the APIs filed under `category`.
pub async fn learn_in(
    dir: &Path,
    train: &[&Chain],
    specs: &[Spec],
    category: &str,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    cache: Option<Arc<EmbeddingCache>>,
) -> Result<Learned, toolgraph_ingest::IngestError> {
    let io = |e: std::io::Error| toolgraph_ingest::IngestError::Input(format!("writing under {}: {e}", dir.display()));
    let tools_path = dir.join("tools.jsonl");
    let runs_path = dir.join("runs.jsonl");
    let mut tw = std::io::BufWriter::new(std::fs::File::create(&tools_path).map_err(io)?);
    for line in tools_lines(specs, category) {
        writeln!(tw, "{line}").map_err(io)?;
    }
    tw.flush().map_err(io)?;
    let tools: BTreeMap<String, String> = specs.iter().map(|s| (s.name.clone(), tool_of_host(&s.host))).collect();
    let mut rw = std::io::BufWriter::new(std::fs::File::create(&runs_path).map_err(io)?);
    for (i, c) in train.iter().enumerate() {
        if let Ok(run) = run_of_chain(i, c, &tools, category) {
            writeln!(rw, "{}", serde_json::to_string(&run).unwrap_or_default()).map_err(io)?;
        }
    }
    rw.flush().map_err(io)?;
    drop(rw);
    let stack = Stack::embedded_in(dir, settings, embedder.clone(), cache).await?;
    let store = stack.store.clone();
    let inputs = Inputs { tools: vec![tools_path], trajectories: vec![runs_path], ..Inputs::default() };
    toolgraph_engine::ingest::ingest(store.clone(), inputs, settings, Arc::new(NoProgress)).await?;
    stack.index(false).await?;
    let retriever = stack.retriever().await?;
    let memory = stack.memory.clone();
    // Long-term memory: every training request with its chain (arguments that reference an
    // earlier output keep the reference; the rest are re-filled when replayed).
    let snapshot = store.node_snapshot().await?;
    let id_of: HashMap<&str, &str> = snapshot.apis.values().map(|a| (a.name.as_str(), a.id.as_str())).collect();
    let requests: Vec<String> = train.iter().map(|c| c.input.trim().to_string()).collect();
    let vecs = embedder.embed(requests.clone()).await?;
    // The memory compares requests by meaning (mentions masked), as the engine does.
    let meanings = embedder.embed(requests.iter().map(|r| toolgraph_engine::plan::meaning_text(r)).collect()).await?;
    for ((c, (req, v)), meaning) in train.iter().zip(requests.iter().zip(vecs)).zip(meanings) {
        // Usage vectors: the request joins every API of its chain.
        let used: Vec<String> =
            c.output.iter().filter_map(|call| id_of.get(call.name.as_str()).map(|s| s.to_string())).collect();
        retriever.add_usage(&used, &v).await?;
        // Literals the request never says but an earlier response holds become references.
        let labels: Vec<String> = (1..=c.output.len()).map(|i| format!("var{i}")).collect();
        let empty = Map::new();
        let calls: Vec<RecordedCall<'_>> = c
            .output
            .iter()
            .zip(&labels)
            .filter_map(|(call, label)| {
                let api = id_of.get(call.name.as_str())?;
                Some(RecordedCall {
                    api,
                    label: call.label.as_deref().unwrap_or(label),
                    arguments: call.arguments.as_object().unwrap_or(&empty),
                    response: call.response.as_ref(),
                })
            })
            .collect();
        let steps = recorded_steps(req, &calls);
        memory.remember(req, meaning, steps).await?;
    }
    Ok(Learned { stack, retriever })
}
