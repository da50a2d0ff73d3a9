//! The one place that builds the system: [`Stack::open`] opens what [`Settings`] names — the graph
//! store, the vector store, the embedder, the long-term memory, the executor and the planners —
//! and [`Stack::engine`] builds an [`Engine`] over them. Every entry point gets its engine here:
//! the CLI's `ask`, the daemon behind `serve` and `mcp` (which rebuilds it after the graph changes),
//! the evaluation harnesses (one stack per fold, over the stores they learned) and the tests.

use crate::adapters::fastembed::FastEmbedder;
use crate::embed::Embedder;
use crate::exec::{ExecSettings, Executor};
use crate::memory::store::Memory;
use crate::plan::llm::{LlmPlanner, LlmSettings};
use crate::plan::models::Models;
use crate::plan::Planner;
use crate::retrieval::cache::EmbeddingCache;
use crate::retrieval::hybrid::Retriever;
use crate::run::health::Health;
use crate::run::{Engine, EngineParts, RunSettings};
use crate::vector::VectorStore;
use crate::{EngineError, GraphStore, Result};
use std::path::Path;
use std::sync::Arc;
use toolgraph_schema::{EmbedSettings, GraphSnapshot, PlannerKind, Settings};

/// Who decides, as a command line or a request chose it.
#[derive(Debug, Clone, Default)]
pub struct PlannerChoice {
    /// Which planner.
    pub kind: PlannerKind,
    /// For the LLM planner: a model configured under `[llm.models.NAME]` (the default when `None`).
    pub model: Option<String>,
    /// For the LLM planner: an OpenAI-compatible base URL used instead of the configured models
    /// (its key from `TOOLGRAPH_LLM_API_KEY(_FILE)`).
    pub url: Option<String>,
    /// With `url`: the model name that endpoint expects.
    pub endpoint_model: String,
}

impl PlannerChoice {
    /// The models a run may pick from: the configured ones, or the one `url` names. `categories`
    /// are the graph's tool categories an LLM decomposition may name.
    pub fn models(&self, s: &Settings, categories: &[String]) -> Result<Models> {
        match &self.url {
            Some(url) => {
                let key =
                    toolgraph_schema::secrets::env_secret("TOOLGRAPH_LLM_API_KEY").map_err(EngineError::Config)?;
                let name = self.model.clone().unwrap_or_else(|| "cli".into());
                let p = LlmPlanner::new(
                    LlmSettings {
                        name: name.clone(),
                        base_url: url.clone(),
                        model: self.endpoint_model.clone(),
                        ..Default::default()
                    },
                    key,
                )?
                .with_categories(categories.to_vec());
                Ok(Models::single(&name, p))
            }
            None => Models::from_config(&s.llm, categories),
        }
    }

    /// The chosen planner among `models` (the endpoint's own model when a URL was given).
    pub fn planner(&self, models: &Models) -> Result<Arc<dyn Planner>> {
        let model = match self.kind {
            PlannerKind::Llm => self.model.as_deref().filter(|_| self.url.is_none()),
            PlannerKind::Deterministic => None,
        };
        models.planner(self.kind.name(), model).map_err(EngineError::Config)
    }

    /// The chosen model itself when the choice is an LLM (`None` for the deterministic planner).
    pub fn llm(&self, models: &Models) -> Option<Arc<crate::plan::llm::LlmPlanner>> {
        match self.kind {
            PlannerKind::Llm => models.llm(self.model.as_deref().filter(|_| self.url.is_none())),
            PlannerKind::Deterministic => None,
        }
    }
}

/// What a toolgraph process runs on. Fields are public so a harness can assemble one over stores
/// it opened itself ([`Stack::over`]); [`Stack::open`] opens them from the settings,
/// [`Stack::embedded_in`] on embedded stores of its own in a folder.
#[derive(Clone)]
pub struct Stack {
    /// The settings it was opened with.
    pub settings: Settings,
    /// The tool graph.
    pub store: Arc<dyn GraphStore>,
    /// The vector store (API index, memory, usage vectors).
    pub vectors: Arc<dyn VectorStore>,
    /// Embeds API texts (indexing) and, unless an engine is given another, requests.
    pub embedder: Arc<dyn Embedder>,
    /// Embeddings kept across runs of the indexer (`embed.cache`), when configured.
    pub cache: Option<Arc<EmbeddingCache>>,
    /// The long-term memory.
    pub memory: Arc<Memory>,
    /// Sends calls.
    pub executor: Executor,
    /// The planner runs use unless a request picks another from `models`.
    pub planner: Arc<dyn Planner>,
    /// The planners and models a request may pick; `None`: built from `settings.llm` by whoever
    /// needs the list (the daemon, with the graph's categories).
    pub models: Option<Arc<Models>>,
}

/// Makes the table `run.lexicon` names the reader's language (nothing to do when empty).
fn install_lexicon(path: &str) -> Result<()> {
    if path.is_empty() {
        return Ok(());
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::EngineError::Config(format!("run.lexicon `{path}` cannot be read: {e}")))?;
    crate::read::lexicon::install(&text, path).map_err(|e| crate::EngineError::Config(format!("run.lexicon: {e}")))
}

impl Stack {
    /// Open what `settings` names: the graph store (schema set up), the vector store, the embedder,
    /// the memory, the executor (tool URLs rewritten by `rewrites`, FROM → TO) and the planner
    /// `planner` chooses (its models listed for requests that pick another).
    pub async fn open(settings: Settings, planner: &PlannerChoice, rewrites: Vec<(String, String)>) -> Result<Stack> {
        crate::clock::Clock::of(&settings.run)?;
        install_lexicon(settings.run.lexicon.trim())?;
        let store = crate::store::open(&settings.store).await?;
        store.setup().await?;
        let vectors = crate::store::open_vectors(&settings.vectors)?;
        let embedder = load_embedder(&settings.embed).await?;
        let cache = if settings.embed.cache.is_empty() {
            None
        } else {
            Some(Arc::new(EmbeddingCache::open(Path::new(&settings.embed.cache))?))
        };
        let executor = Executor::new(exec_settings(&settings, rewrites))?;
        let categories: Vec<String> =
            store.node_snapshot().await?.categories.values().map(|c| c.name.clone()).collect();
        let models = Arc::new(planner.models(&settings, &categories)?);
        let chosen = planner.planner(&models)?;
        let mut stack = Stack::over(settings, store, vectors, embedder, executor).await?;
        stack.cache = cache;
        stack.planner = chosen;
        stack.models = Some(models);
        Ok(stack)
    }

    /// A stack over stores opened elsewhere (an evaluation fold's, a test's): its memory opened on
    /// `vectors`, the deterministic planner, no embedding cache, models from `settings.llm`.
    pub async fn over(
        settings: Settings,
        store: Arc<dyn GraphStore>,
        vectors: Arc<dyn VectorStore>,
        embedder: Arc<dyn Embedder>,
        executor: Executor,
    ) -> Result<Stack> {
        let memory = Arc::new(Memory::open(vectors.clone(), embedder.dim()).await?);
        Ok(Stack {
            settings,
            store,
            vectors,
            embedder,
            cache: None,
            memory,
            executor,
            planner: Arc::new(crate::plan::deterministic::DeterministicPlanner::default()),
            models: None,
        })
    }

    /// A stack on embedded stores of its own under `dir` (an evaluation fold's, a test's): the
    /// graph in `dir/graph.redb` (schema set up) and the vectors in `dir/vectors`, with the rest
    /// of `settings`; APIs and requests embedded by `embedder`, API embeddings kept in `cache`;
    /// calls sent as `settings` says (an evaluation gives each fold its replay executor).
    pub async fn embedded_in(
        dir: &Path,
        settings: &Settings,
        embedder: Arc<dyn Embedder>,
        cache: Option<Arc<EmbeddingCache>>,
    ) -> Result<Stack> {
        let mut settings = settings.clone();
        settings.store.uri = format!("embedded:{}", dir.join("graph.redb").display());
        settings.vectors.uri = format!("embedded:{}", dir.join("vectors").display());
        let store = crate::store::open(&settings.store).await?;
        store.setup().await?;
        let vectors = crate::store::open_vectors(&settings.vectors)?;
        let executor = Executor::new(exec_settings(&settings, Vec::new()))?;
        let mut stack = Stack::over(settings, store, vectors, embedder, executor).await?;
        stack.cache = cache;
        Ok(stack)
    }

    /// The retriever over this stack's API index, requests embedded by the stack's embedder.
    pub async fn retriever(&self) -> Result<Arc<Retriever>> {
        Ok(Arc::new(
            Retriever::load(self.vectors.clone(), self.embedder.clone(), None, self.settings.retrieval.clone()).await?,
        ))
    }

    /// The same stack deciding with `planner`.
    pub fn with_planner(mut self, planner: Arc<dyn Planner>) -> Self {
        self.planner = planner;
        self
    }

    /// Index what the graph holds that the vector store does not have yet (or all, `rebuild`).
    pub async fn index(&self, rebuild: bool) -> Result<crate::retrieval::index::SyncReport> {
        crate::retrieval::index::index_graph(
            self.store.as_ref(),
            self.vectors.as_ref(),
            self.embedder.as_ref(),
            self.cache.as_deref(),
            self.settings.retrieval.index_chunk,
            rebuild,
            |_, _| {},
        )
        .await
    }

    /// An engine over the graph and API index as they are now, with the run settings of the config.
    pub async fn engine(&self) -> Result<Engine> {
        self.engine_with(self.embedder.clone(), self.settings.run.clone(), None).await
    }

    /// An engine over the graph and API index as they are now: requests embedded by `queries`
    /// (the daemon memoizes them), runs under `run`, API health shared through `health`.
    pub async fn engine_with(
        &self,
        queries: Arc<dyn Embedder>,
        run: RunSettings,
        health: Option<Arc<Health>>,
    ) -> Result<Engine> {
        let graph = Arc::new(self.store.snapshot().await?);
        let retriever =
            Arc::new(Retriever::load(self.vectors.clone(), queries, None, self.settings.retrieval.clone()).await?);
        Ok(self.engine_over(graph, retriever, run, health))
    }

    /// An engine over a graph already loaded and a retriever already opened (an evaluation runs
    /// several methods over one fold's).
    pub fn engine_over(
        &self,
        graph: Arc<GraphSnapshot>,
        retriever: Arc<Retriever>,
        run: RunSettings,
        health: Option<Arc<Health>>,
    ) -> Engine {
        Engine::new(EngineParts {
            graph,
            store: Some(self.store.clone()),
            retriever,
            memory: Some(self.memory.clone()),
            executor: self.executor.clone(),
            planner: self.planner.clone(),
            settings: run,
            weights: self.settings.weights,
            health,
        })
    }
}

/// The embedder `embed` configures (ONNX Runtime and the model loaded off the async threads).
pub async fn load_embedder(embed: &EmbedSettings) -> Result<Arc<dyn Embedder>> {
    let embed = embed.clone();
    let e = tokio::task::spawn_blocking(move || FastEmbedder::load(&embed))
        .await
        .map_err(|e| EngineError::Config(format!("loading the embedder: {e}")))??;
    Ok(Arc::new(e))
}

/// The executor's settings with URL rewrites added. A rewrite to a non-public address (the replay
/// sandbox on loopback) admits exactly its target — that address on that port — and nothing else
/// there (not the daemon's own port).
pub fn exec_settings(s: &Settings, rewrites: Vec<(String, String)>) -> ExecSettings {
    let mut e = s.exec.clone();
    for (_, to) in &rewrites {
        let Ok(url) = reqwest::Url::parse(to) else { continue };
        let Some(port) = url.port_or_known_default() else { continue };
        let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<std::net::IpAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) if host.eq_ignore_ascii_case("localhost") => {
                vec![std::net::Ipv4Addr::LOCALHOST.into(), std::net::Ipv6Addr::LOCALHOST.into()]
            }
            Err(_) => Vec::new(),
        };
        for ip in ips.into_iter().filter(|ip| crate::exec::guard::non_public(*ip).is_some()) {
            e.allow_private.push(std::net::SocketAddr::new(ip, port).to_string());
        }
    }
    e.rewrites.extend(rewrites);
    e
}

#[cfg(test)]
mod tests {
    use super::exec_settings;

    #[test]
    fn a_rewrite_admits_exactly_its_target() {
        let s = crate::settings::load(None, &[]).unwrap();
        let e = exec_settings(
            &s,
            vec![
                ("https://".into(), "http://127.0.0.1:8765/".into()),
                ("http://a/".into(), "http://localhost:9000/".into()),
                ("http://b/".into(), "https://api.example.com/".into()),
            ],
        );
        let added: Vec<&str> = e.allow_private.iter().map(String::as_str).skip(s.exec.allow_private.len()).collect();
        assert_eq!(added, ["127.0.0.1:8765", "127.0.0.1:9000", "[::1]:9000"]);
    }
}
