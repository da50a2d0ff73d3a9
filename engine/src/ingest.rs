//! The one way into an ingest that trains everything the engine learns: the graph's counts
//! (ingest's own) and the argument model ([`ArgTrainer`]), whose increments are applied with each
//! batch's counts. The CLI and the evaluations call this; none wires a trainer itself, so a new
//! caller cannot forget one.

use crate::run::args::ArgTrainer;
use crate::GraphStore;
use std::sync::Arc;
use toolgraph_ingest::pipeline::Learner;
use toolgraph_ingest::{IngestError, IngestReport, Inputs, Progress};
use toolgraph_schema::Settings;

/// Ingest `inputs` into `store` ([`toolgraph_ingest::ingest`]) with the argument model learning
/// from every new answered run.
pub async fn ingest(
    store: Arc<dyn GraphStore>,
    mut inputs: Inputs,
    settings: &Settings,
    progress: Arc<dyn Progress>,
) -> Result<IngestReport, IngestError> {
    inputs.learner = Some(Learner(Arc::new(ArgTrainer::open(store.as_ref()).await?)));
    toolgraph_ingest::ingest(store, inputs, settings, progress).await
}
