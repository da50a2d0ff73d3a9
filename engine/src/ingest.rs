//! The one way into an ingest that trains everything the engine learns from trajectories: the
//! graph's counts (ingest's own), the argument model ([`ArgTrainer`]), the long-term memory (each
//! answered run's request, its meaning embedding and its chain, with a reference wherever a value
//! came from an earlier response — what a run replays by analogy) and the usage vectors (the
//! request joins every API its chain called). Each batch's new runs — those the ledger does not
//! hold — teach all of them, the memory and usage vectors just before the batch's counts and keys
//! are written: re-ingesting a file teaches nothing twice. The CLI, the evaluations and the tests
//! call this; none wires a learner itself, so the evaluated system is the shipped one.

use crate::embed::Embedder;
use crate::fill::args::{example_steps, ArgTrainer};
use crate::graph::write::ExampleSink;
use crate::memory::store::{Memory, MemoryStep};
use crate::read::meaning_text;
use crate::retrieval::usage::UsageVectors;
use crate::stack::Stack;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use toolgraph_graph::CountDelta;
use toolgraph_ingest::pipeline::Learner;
use toolgraph_ingest::{IngestError, IngestReport, Inputs, Progress};
use toolgraph_schema::Example;

/// Ingest `inputs` into `stack`'s stores ([`toolgraph_ingest::ingest`] under `stack.settings`):
/// the graph, and with every new answered run the argument model, the long-term memory and the
/// usage vectors. The report counts the runs remembered (`memories`).
pub async fn ingest(
    stack: &Stack,
    mut inputs: Inputs,
    progress: Arc<dyn Progress>,
) -> Result<IngestReport, IngestError> {
    let teacher = Arc::new(Teacher {
        args: ArgTrainer::open(stack.store.as_ref(), crate::clock::Clock::of(&stack.settings.run)?).await?,
        memory: stack.memory.clone(),
        embedder: stack.embedder.clone(),
        usage: UsageVectors::load(stack.vectors.clone(), stack.embedder.dim()).await?,
        remembered: AtomicU64::new(0),
    });
    inputs.learner = Some(Learner(teacher.clone()));
    let mut report = toolgraph_ingest::ingest(stack.store.clone(), inputs, &stack.settings, progress).await?;
    report.memories = teacher.remembered.load(Ordering::Relaxed);
    Ok(report)
}

/// What an ingest's new runs teach beside the graph's counts.
struct Teacher {
    args: ArgTrainer,
    memory: Arc<Memory>,
    embedder: Arc<dyn Embedder>,
    usage: UsageVectors,
    remembered: AtomicU64,
}

#[async_trait::async_trait]
impl ExampleSink for Teacher {
    fn learn(&self, examples: &[&Example]) -> Vec<CountDelta> {
        self.args.learn(examples)
    }

    fn learned(&self) -> u64 {
        self.args.learned()
    }

    async fn remember(&self, fresh: &[(&str, &Example)]) -> crate::Result<()> {
        let requests: Vec<String> = fresh.iter().map(|(_, e)| e.request.trim().to_string()).collect();
        // The usage vectors take the request as said; the memory compares requests by meaning
        // (mentions masked), as a run recalls.
        let said = self.embedder.embed(requests.clone()).await?;
        let meanings = self.embedder.embed(requests.iter().map(|r| meaning_text(r)).collect()).await?;
        let apis: Vec<Vec<String>> =
            fresh.iter().map(|(_, e)| e.calls.iter().map(|c| c.api_id.clone()).collect()).collect();
        let chains: Vec<(&[String], &[f32])> =
            apis.iter().map(Vec::as_slice).zip(said.iter().map(Vec::as_slice)).collect();
        self.usage.add(&chains).await?;
        let entries: Vec<(String, Vec<f32>, Vec<MemoryStep>)> = fresh
            .iter()
            .zip(requests)
            .zip(meanings)
            .map(|(((_, e), request), meaning)| (request, meaning, example_steps(e)))
            .collect();
        self.remembered.fetch_add(entries.len() as u64, Ordering::Relaxed);
        self.memory.remember_all(entries).await
    }
}
