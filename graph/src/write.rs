//! The one road into the graph's counts: ingested trajectories and the engine's own runs are both
//! [`Contribution`]s, written by a [`ContributionWriter`] — derived data marked stale before the
//! first write, runs the ledger already holds skipped (by key, in the same atomic write as their
//! counts, so a replayed batch or a retried run never counts twice), the summed counts applied, and
//! at the end the weights of every source whose edges changed recomputed before the stale mark is
//! cleared.

use crate::{aggregate, counts, weights, ContributionBatch, CountDelta, GraphStore, Result};
use std::collections::{BTreeSet, HashSet};
use toolgraph_schema::{Contribution, WeightSettings, END_ID, START_ID};

/// Learns from the examples of the runs a writer writes (the engine's argument model): each new
/// run's [`Example`](toolgraph_schema::Example) once, as its counts are applied. What it learned
/// comes back as counter increments, which the writer applies in the same atomic write as the
/// run's other counts and its ledger key: a run the ledger holds teaches nothing twice, and two
/// processes learning at once both count.
#[async_trait::async_trait]
pub trait ExampleSink: Send + Sync {
    /// Learn a batch's `examples` (into the sink's own copy of the model too) and return the
    /// increments they made together (one diff a batch: what the learned parts hold after, less
    /// what they held before).
    fn learn(&self, examples: &[&toolgraph_schema::Example]) -> Vec<CountDelta>;
    /// How many examples it has learned.
    fn learned(&self) -> u64;
    /// Teach what lives outside the graph store (the engine's long-term memory and usage
    /// vectors) the new runs of a batch, each with its ledger key: called once per batch, before
    /// the batch's counts and keys are written. A process stopped between the two teaches the
    /// batch again at the next ingest, so what it writes is keyed to replace itself (memory
    /// entries) or counted at most one batch twice (usage sums). Nothing by default.
    async fn remember(&self, fresh: &[(&str, &toolgraph_schema::Example)]) -> Result<()> {
        let _ = fresh;
        Ok(())
    }
}

/// Writes contributions into one store; see the [module](self).
pub struct ContributionWriter<'s> {
    store: &'s dyn GraphStore,
    /// Where new runs' examples go.
    sink: Option<&'s dyn ExampleSink>,
    /// Derived data (weights, FEEDS) marked stale by this writer.
    marked_dirty: bool,
    /// Keys written (or found in the ledger) by this writer.
    seen: HashSet<String>,
    /// Runs skipped because their key was written before.
    pub already: u64,
    /// Sources of the NEXT edges written: their weights are stale.
    pub touched: BTreeSet<String>,
    /// Observed API → API pairs written (START and END left out): where FEEDS may be derived.
    pub pairs: BTreeSet<(String, String)>,
}

impl<'s> ContributionWriter<'s> {
    pub fn new(store: &'s dyn GraphStore) -> Self {
        ContributionWriter {
            store,
            sink: None,
            marked_dirty: false,
            seen: HashSet::new(),
            already: 0,
            touched: BTreeSet::new(),
            pairs: BTreeSet::new(),
        }
    }

    /// Hand each new run's example to `sink` (runs the ledger already holds are not learned twice).
    pub fn with_sink(mut self, sink: Option<&'s dyn ExampleSink>) -> Self {
        self.sink = sink;
        self
    }

    /// Mark the store's derived data stale (once), before a write that changes what it derives
    /// from: an interrupted writer leaves the mark, and the next ingest recomputes everything.
    pub async fn mark_dirty(&mut self) -> Result<()> {
        if !self.marked_dirty {
            self.store.set_weights_dirty(true).await?;
            self.marked_dirty = true;
        }
        Ok(())
    }

    /// Write the runs whose keys neither this writer nor the store's ledger holds; returns the
    /// summed counts applied (empty when every run was known).
    pub async fn write(&mut self, runs: Vec<Contribution>) -> Result<ContributionBatch> {
        let mut fresh: Vec<Contribution> = Vec::with_capacity(runs.len());
        for c in runs {
            if self.seen.insert(c.key.clone()) {
                fresh.push(c);
            } else {
                self.already += 1;
            }
        }
        let keys: Vec<String> = fresh.iter().map(|c| c.key.clone()).collect();
        if keys.is_empty() {
            return Ok(ContributionBatch::default());
        }
        let stored = self.store.ingested_keys(&keys).await?;
        self.already += stored.len() as u64;
        fresh.retain(|c| !stored.contains(&c.key));
        if fresh.is_empty() {
            return Ok(ContributionBatch::default());
        }
        let mut batch = aggregate(&fresh);
        if let Some(sink) = self.sink {
            let keyed: Vec<(&str, &toolgraph_schema::Example)> =
                fresh.iter().filter_map(|c| Some((c.key.as_str(), c.example.as_ref()?))).collect();
            if !keyed.is_empty() {
                sink.remember(&keyed).await?;
                let examples: Vec<&toolgraph_schema::Example> = keyed.iter().map(|(_, e)| *e).collect();
                batch.counts = counts::summed(sink.learn(&examples));
            }
        }
        if !batch.edges.is_empty() {
            self.mark_dirty().await?;
        }
        self.store.apply_contributions(&batch).await?;
        for e in &batch.edges {
            self.touched.insert(e.from.clone());
            if e.from != START_ID && e.to != END_ID {
                self.pairs.insert((e.from.clone(), e.to.clone()));
            }
        }
        Ok(batch)
    }

    /// Apply counter increments learned outside a run (a model learned from the long-term
    /// memory) under ledger key `key`, once: `false` when the ledger holds the key already.
    pub async fn write_counts(&mut self, key: &str, deltas: Vec<CountDelta>) -> Result<bool> {
        if !self.seen.insert(key.to_string()) || !self.store.ingested_keys(&[key.to_string()]).await?.is_empty() {
            self.already += 1;
            return Ok(false);
        }
        let batch =
            ContributionBatch { keys: vec![key.to_string()], counts: counts::summed(deltas), ..Default::default() };
        self.store.apply_contributions(&batch).await?;
        Ok(true)
    }

    /// Recompute the weights of the sources written (every source when `all`, as after an
    /// interrupted ingest), `batch_rows` edges per write; returns how many edges were recomputed.
    pub async fn recompute(&self, params: WeightSettings, batch_rows: usize, all: bool) -> Result<usize> {
        if all {
            return weights::recompute(self.store, None, params, batch_rows).await;
        }
        if self.touched.is_empty() {
            return Ok(0);
        }
        let sources: Vec<String> = self.touched.iter().cloned().collect();
        weights::recompute(self.store, Some(&sources), params, batch_rows).await
    }

    /// Whether this writer marked derived data stale.
    pub fn marked_dirty(&self) -> bool {
        self.marked_dirty
    }

    /// Clear the stale mark once derived data is current again.
    pub async fn clear_dirty(&mut self) -> Result<()> {
        self.store.set_weights_dirty(false).await?;
        self.marked_dirty = false;
        Ok(())
    }
}
