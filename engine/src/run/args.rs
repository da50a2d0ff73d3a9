//! The argument model's life with the graph: read from the store when the first run needs it
//! (learned once from the long-term memory where the store holds none, as graphs ingested before
//! it existed), updated and written back, the parts a run changed, after every run remembered;
//! and [`ArgTrainer`], which `ingest` hands each new answered run to.

use super::memory::{recorded_steps, MemoryStep, RecordedCall};
use super::{Engine, MAX_ARG_EXAMPLES};
use crate::graph::write::ExampleSink;
use crate::graph::GraphStore;
use crate::plan::learned::{ArgModel, Touched, PARTS_PREFIX};
use crate::Result;
use std::sync::{Arc, Mutex};

/// The argument model stored with `store`'s graph: `None` when none is stored; an error when a
/// stored one does not read (it names the part).
pub async fn stored_model(store: &dyn GraphStore) -> Result<Option<ArgModel>> {
    let parts = store.model_parts(PARTS_PREFIX).await?;
    ArgModel::from_parts(&parts).map_err(crate::EngineError::Config)
}

/// Learn `ArgModel` from one recorded example (request, calls with arguments and responses):
/// literals an earlier response holds are references first (they are the graph's FEEDS, not a
/// mention of the request).
fn learn_example(model: &mut ArgModel, example: &toolgraph_schema::Example, today: chrono::NaiveDate) -> Touched {
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
    let steps = recorded_steps(&example.request, &calls);
    model.learn(&example.request, steps.iter().map(|s| (s.api.as_str(), &s.arguments)), today)
}

/// Trains the argument model from an ingest's new answered runs ([`ExampleSink`]): it starts
/// from the model the store holds, learns each run once (the ledger skips runs ingested before),
/// and writes the parts changed since the last write each time `finish` is called (after every
/// batch the ingest applies, and at its end), so a killed ingest loses at most the batch it was
/// writing.
pub struct ArgTrainer {
    state: Mutex<(ArgModel, Touched, u64)>,
    today: chrono::NaiveDate,
}

impl ArgTrainer {
    /// A trainer continuing the model `store` holds (a fresh one when it holds none, or one this
    /// build cannot read: that one is replaced, with a warning).
    pub async fn open(store: &dyn GraphStore) -> Result<ArgTrainer> {
        let model = match stored_model(store).await {
            Ok(m) => m.unwrap_or_default(),
            Err(crate::EngineError::Config(why)) => {
                tracing::warn!("{why}: the ingest learns a new argument model");
                ArgModel::default()
            }
            Err(e) => return Err(e),
        };
        Ok(ArgTrainer { state: Mutex::new((model, Touched::default(), 0)), today: chrono::Utc::now().date_naive() })
    }
}

#[async_trait::async_trait]
impl ExampleSink for ArgTrainer {
    fn learn(&self, example: &toolgraph_schema::Example) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let touched = learn_example(&mut st.0, example, self.today);
        st.1.extend(touched);
        st.2 += 1;
    }

    async fn finish(&self, store: &dyn GraphStore) -> crate::graph::Result<u64> {
        let (parts, n) = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if st.1 == Touched::default() {
                return Ok(st.2);
            }
            let touched = std::mem::take(&mut st.1);
            (st.0.parts(Some(&touched)), st.2)
        };
        store.set_model_parts(&parts).await?;
        Ok(n)
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
            None => {
                let Some(memory) = &self.memory else { return Ok(None) };
                let today = chrono::Utc::now().date_naive();
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
                if let Some(store) = self.store.as_ref().filter(|_| model.examples > 0) {
                    store.set_model_parts(&model.parts(None)).await?;
                }
                model
            }
        };
        let model = Arc::new(model);
        let mut slot = self.args.write().unwrap_or_else(|p| p.into_inner());
        Ok(Some(slot.get_or_insert(model).clone()))
    }

    /// Learn from a run as it is remembered, and write the parts it changed to the store (a
    /// failed write is logged: the run and its memory stand, the next update writes them again).
    pub(super) async fn learn_args(&self, request: &str, chain: &[MemoryStep]) {
        let Some(store) = &self.store else { return self.learn_args_in_place(request, chain) };
        let parts = {
            let mut slot = self.args.write().unwrap_or_else(|p| p.into_inner());
            let Some(m) = slot.as_mut() else { return };
            let m = Arc::make_mut(m);
            let touched =
                m.learn(request, chain.iter().map(|s| (s.api.as_str(), &s.arguments)), chrono::Utc::now().date_naive());
            m.parts(Some(&touched))
        };
        if let Err(e) = store.set_model_parts(&parts).await {
            tracing::warn!("storing the argument model's update failed: {e}");
        }
    }

    /// An engine without a store keeps its model in memory only.
    fn learn_args_in_place(&self, request: &str, chain: &[MemoryStep]) {
        if let Some(m) = self.args.write().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Arc::make_mut(m).learn(
                request,
                chain.iter().map(|s| (s.api.as_str(), &s.arguments)),
                chrono::Utc::now().date_naive(),
            );
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
        let touched = learn_example(&mut m, &example, today);
        assert_eq!(touched.apis.iter().map(String::as_str).collect::<Vec<_>>(), ["car/loc", "car/rent"]);
        assert_eq!(m.slots["car/rent"]["drop_off_time"].kinds.get(&crate::plan::learned::Kind::Time), Some(&1));
        assert!(!m.slots["car/rent"].contains_key("pick_up_latitude"), "an earlier output's value is a reference");
        let back = ArgModel::from_parts(&m.parts(None)).unwrap().unwrap();
        assert_eq!(back, m);
        assert_eq!(ArgModel::from_parts(&[]).unwrap(), None);
        let mut other = m.parts(None);
        other[0].1 = "99".into();
        assert!(ArgModel::from_parts(&other).unwrap_err().contains("format 99"));
    }
}
