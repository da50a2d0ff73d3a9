//! Learning a fold: the training chains converted to trajectories and ingested into fresh stores
//! by the shipped ingest (graph, argument model, long-term memory, usage vectors), then the API
//! index built — what a user gets from `convert` + `ingest`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::Executor;
use toolgraph_engine::retrieval::cache::EmbeddingCache;
use toolgraph_engine::retrieval::hybrid::Retriever;
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

/// Learn from `train` into fresh stores under `dir` (see the [module](self)).
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
    // The shipped ingest, and nothing else, teaches the fold: graph, argument model, long-term
    // memory and usage vectors.
    let stack = Stack::embedded_in(dir, settings, embedder, cache).await?;
    let inputs = Inputs { tools: vec![tools_path], trajectories: vec![runs_path], ..Inputs::default() };
    toolgraph_engine::ingest::ingest(&stack, inputs, Arc::new(NoProgress)).await?;
    stack.index(false).await?;
    let retriever = stack.retriever().await?;
    Ok(Learned { stack, retriever })
}
