//! The argument model's life with the graph: read from the store's counters when the first run
//! needs it (learned once from the long-term memory where the store holds none, as graphs
//! ingested before it existed), read again when the store changed ([`Engine::refreshed`]); and
//! the [`ExampleSink`]s that teach it — [`ArgTrainer`] for ingest, the engine's own for the runs
//! it learns from. Either way what a run teaches is counter increments, applied by the
//! [`ContributionWriter`] in the same atomic write as the run's other counts and ledger key.

use crate::fill::learned::{ArgModel, ARGUMENT_COUNTS};
use crate::graph::write::{ContributionWriter, ExampleSink};
use crate::graph::GraphStore;
use crate::memory::store::{recorded_steps, MemoryStep, RecordedCall};
use crate::run::engine::{Engine, MAX_ARG_EXAMPLES};
use crate::Result;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use toolgraph_graph::CountDelta;
use toolgraph_schema::fields::name_key;

/// The ledger key under which a model learned from the long-term memory is written (once per
/// store: a second process finds it and reads the stored model instead).
const FROM_MEMORY_KEY: &str = "model:arguments:from-memory";

/// The argument model stored with `store`'s graph: `None` when none is stored; an error when a
/// stored one does not read (it names the counter).
pub async fn stored_model(store: &dyn GraphStore) -> Result<Option<ArgModel>> {
    let stored = store.model_counts(ARGUMENT_COUNTS).await?;
    ArgModel::from_counts(&stored).map_err(crate::EngineError::Config)
}

/// Learn `ArgModel` from recorded examples (request, calls with arguments and responses):
/// literals an earlier response holds are references first (they are the graph's FEEDS, not a
/// mention of the request). Returns the counter increments they made together.
fn learn_examples(
    model: &mut ArgModel,
    examples: &[&toolgraph_schema::Example],
    today: chrono::NaiveDate,
) -> Vec<CountDelta> {
    let steps: Vec<(&str, Vec<MemoryStep>)> = examples.iter().map(|e| (e.request.as_str(), example_steps(e))).collect();
    let apis: BTreeSet<String> = steps.iter().flat_map(|(_, s)| s.iter().map(|s| s.api.clone())).collect();
    let names: BTreeSet<String> =
        steps.iter().flat_map(|(_, s)| s.iter().flat_map(|s| s.arguments.keys().map(|k| name_key(k)))).collect();
    let words: BTreeSet<String> = steps.iter().flat_map(|(request, _)| crate::read::asks::ask_words(request)).collect();
    let only = crate::fill::learned::Touched { apis, names, words };
    model.learn_counted(&only, |m| {
        for (request, steps) in &steps {
            m.learn(request, steps.iter().map(|s| (s.api.as_str(), &s.arguments)), today);
        }
    })
}

/// An example's calls as the model learns and the memory remembers them (see [`learn_examples`]).
pub(crate) fn example_steps(example: &toolgraph_schema::Example) -> Vec<MemoryStep> {
    let labels: Vec<String> = (1..=example.calls.len()).map(|i| format!("var{i}")).collect();
    let calls: Vec<RecordedCall<'_>> = example
        .calls
        .iter()
        .zip(&labels)
        .map(|(c, label)| RecordedCall {
            api: &c.api_id,
            label: c.label.as_deref().unwrap_or(label),
            arguments: &c.arguments,
            response: c.response.as_ref(),
        })
        .collect();
    recorded_steps(example.request.trim(), &calls)
}

/// Trains the argument model from an ingest's new answered runs ([`ExampleSink`]): it starts
/// from the model the store holds and learns each new run once (the ledger skips runs ingested
/// before); the increments go into the store with each batch's counts.
pub struct ArgTrainer {
    state: Mutex<(ArgModel, u64)>,
    today: chrono::NaiveDate,
}

impl ArgTrainer {
    /// A trainer continuing the model `store` holds (a fresh one when it holds none, or one this
    /// build cannot read: that one is learned again, with a warning).
    pub async fn open(store: &dyn GraphStore, clock: crate::clock::Clock) -> Result<ArgTrainer> {
        let model = match stored_model(store).await {
            Ok(m) => m.unwrap_or_default(),
            Err(crate::EngineError::Config(why)) => {
                tracing::warn!("{why}: the ingest learns a new argument model");
                ArgModel::default()
            }
            Err(e) => return Err(e),
        };
        Ok(ArgTrainer { state: Mutex::new((model, 0)), today: clock.today() })
    }
}

impl ExampleSink for ArgTrainer {
    fn learn(&self, examples: &[&toolgraph_schema::Example]) -> Vec<CountDelta> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.1 += examples.len() as u64;
        learn_examples(&mut st.0, examples, self.today)
    }

    fn learned(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1
    }
}

/// The engine's own runs teach its model ([`Engine::learn_from`]): the model in use learns at
/// once, the store gets the increments with the run's counts.
pub(crate) struct RunTeaches<'e>(pub &'e Engine);

impl ExampleSink for RunTeaches<'_> {
    fn learn(&self, examples: &[&toolgraph_schema::Example]) -> Vec<CountDelta> {
        let mut slot = self.0.args.write().unwrap_or_else(|p| p.into_inner());
        let Some(m) = slot.as_mut() else { return Vec::new() };
        learn_examples(Arc::make_mut(m), examples, self.0.clock.today())
    }

    fn learned(&self) -> u64 {
        0
    }
}

impl Engine {
    /// The argument model: the one stored with the graph, read on first use; where the store
    /// holds none, learned from the long-term memory (at most [`MAX_ARG_EXAMPLES`] entries) and
    /// stored. `None` with neither a stored model nor a memory.
    pub async fn arg_model(&self) -> Result<Option<Arc<ArgModel>>> {
        if let Some(m) = self.args.read().unwrap_or_else(|p| p.into_inner()).clone() {
            return Ok(Some(m));
        }
        let stored = match &self.store {
            Some(store) => stored_model(store.as_ref()).await,
            None => Ok(None),
        };
        let stored = match stored {
            Ok(m) => m,
            Err(crate::EngineError::Config(why)) => {
                tracing::warn!("{why}: learning it again from the long-term memory");
                None
            }
            Err(e) => return Err(e),
        };
        let model = match stored {
            Some(m) => m,
            None => match self.model_from_memory().await? {
                Some(m) => m,
                None => return Ok(None),
            },
        };
        let model = Arc::new(model);
        let mut slot = self.args.write().unwrap_or_else(|p| p.into_inner());
        Ok(Some(slot.get_or_insert(model).clone()))
    }

    /// The model learned from the long-term memory, its counters written under one ledger key
    /// (a process that finds the key written reads the stored model instead); `None` without a
    /// memory.
    async fn model_from_memory(&self) -> Result<Option<ArgModel>> {
        let Some(memory) = &self.memory else { return Ok(None) };
        let today = self.clock.today();
        let entries = memory.list().await?;
        let model = tokio::task::spawn_blocking(move || {
            let mut m = ArgModel::default();
            for (_, e) in entries.iter().take(MAX_ARG_EXAMPLES) {
                m.learn(&e.request, e.chain.iter().map(|s| (s.api.as_str(), &s.arguments)), today);
            }
            m
        })
        .await
        .map_err(|e| crate::EngineError::Config(format!("learning the argument model: {e}")))?;
        let Some(store) = self.store.as_ref().filter(|_| model.examples > 0) else { return Ok(Some(model)) };
        let counts = model.counts(None).into_iter().map(|(key, n)| CountDelta { key, n }).collect();
        if ContributionWriter::new(store.as_ref()).write_counts(FROM_MEMORY_KEY, counts).await? {
            return Ok(Some(model));
        }
        // Another process wrote its model first: use that one.
        Ok(stored_model(store.as_ref()).await.ok().flatten().or(Some(model)))
    }

    /// This engine over `graph` (a reload), with the argument model read again from the store
    /// (another process or an ingest may have taught it); the model in use is kept where the
    /// store holds none or the read fails.
    pub async fn refreshed(&self, graph: Arc<toolgraph_schema::GraphSnapshot>) -> Engine {
        let e = self.rebuilt(graph);
        let Some(store) = &self.store else { return e };
        match stored_model(store.as_ref()).await {
            Ok(Some(m)) => *e.args.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(m)),
            Ok(None) => {}
            Err(err) => tracing::warn!(error = %err, "reading the argument model again failed; keeping the one in use"),
        }
        e
    }

    /// An engine without a store keeps its model in memory only: a run it learns from teaches it
    /// in place.
    pub(crate) fn learn_args_in_place(&self, request: &str, chain: &[MemoryStep]) {
        if let Some(m) = self.args.write().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Arc::make_mut(m).learn(request, chain.iter().map(|s| (s.api.as_str(), &s.arguments)), self.clock.today());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What ingest hands over trains the model, references to earlier outputs are not mentions,
    /// and the parts read back as the same model.
    #[test]
    fn examples_train_the_model_and_its_parts_read_back() {
        let call =
            |api: &str, args: serde_json::Value, response: Option<serde_json::Value>| toolgraph_schema::ExampleCall {
                api_id: api.into(),
                label: None,
                arguments: args.as_object().cloned().unwrap(),
                response,
            };
        let example = toolgraph_schema::Example {
            request: "Rent a car at Miami airport at 9 AM on July 3rd, 2024 and return it at 6 PM on July 5th.".into(),
            calls: vec![
                call(
                    "car/loc",
                    json!({"query": "Miami airport"}),
                    Some(json!({"data": [{"coordinates": {"latitude": 25.79}}]})),
                ),
                call(
                    "car/rent",
                    json!({"pick_up_time": "09:00", "drop_off_time": "18:00", "pick_up_latitude": 25.79}),
                    None,
                ),
            ],
        };
        let mut m = ArgModel::default();
        let today = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let deltas = learn_examples(&mut m, &[&example], today);
        assert_eq!(m.slots.keys().map(String::as_str).collect::<Vec<_>>(), ["car/loc", "car/rent"]);
        assert_eq!(m.slots["car/rent"]["drop_off_time"].kinds.get(&crate::fill::learned::Kind::Time), Some(&1));
        // An earlier output's value is a reference: no literal is learned, only where it came from.
        let latitude = &m.slots["car/rent"]["pick_up_latitude"];
        assert_eq!((latitude.support, latitude.producers.get("car/loc")), (0, Some(&1)));
        // The increments from nothing are the whole model, and the counters read back as it.
        let stored: Vec<(String, i64)> = deltas.iter().map(|d| (d.key.clone(), d.n)).collect();
        assert_eq!(ArgModel::from_counts(&stored).unwrap().unwrap(), m);
        assert_eq!(ArgModel::from_counts(&[]).unwrap(), None);
        // A second example's increments, added to the stored counters, read back as the model
        // that learned both.
        let mut summed: std::collections::BTreeMap<String, i64> = stored.into_iter().collect();
        for d in learn_examples(&mut m, &[&example], today) {
            *summed.entry(d.key).or_default() += d.n;
        }
        let summed: Vec<(String, i64)> = summed.into_iter().collect();
        assert_eq!(ArgModel::from_counts(&summed).unwrap().unwrap(), m);
        assert_eq!(m.examples, 2);
        // One batch of both examples gives the same counters.
        let mut batch = ArgModel::default();
        let together: Vec<(String, i64)> =
            learn_examples(&mut batch, &[&example, &example], today).into_iter().map(|d| (d.key, d.n)).collect();
        assert_eq!(batch, m);
        assert_eq!(ArgModel::from_counts(&together).unwrap().unwrap(), m);
        let bad = vec![(format!("{ARGUMENT_COUNTS}[\"slots\""), 1)];
        assert!(ArgModel::from_counts(&bad).unwrap_err().contains("slots"));
    }
}
