//! Property: the graph is a function of the set of runs ingested — ingesting twice equals
//! ingesting once, and ingesting in overlapping pieces equals ingesting everything at once.

use proptest::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toolgraph_engine::adapters::embedded::EmbeddedStore;
use toolgraph_engine::GraphStore;
use toolgraph_ingest::{ingest, Inputs, NoProgress};
use toolgraph_schema::GraphSnapshot;

const APIS: &[(&str, &str)] =
    &[("Maps", "geocode"), ("Maps", "route"), ("Weather", "forecast"), ("Weather", "alerts"), ("Hotels", "search")];

/// A run: indices into APIS with ok flags, and whether it was answered.
type Run = (Vec<(usize, bool)>, bool);

fn line(i: usize, run: &Run) -> String {
    let calls: Vec<serde_json::Value> = run
        .0
        .iter()
        .map(|(a, ok)| {
            let (tool, api) = APIS[*a];
            serde_json::json!({"tool": tool, "api": api, "category": "Travel", "status": if *ok {"ok"} else {"error"}})
        })
        .collect();
    serde_json::json!({"request": format!("request {i}"), "calls": calls, "outcome": if run.1 {"answered"} else {"gave_up"}})
        .to_string()
}

fn write_runs(path: &Path, runs: &[(usize, Run)]) -> PathBuf {
    let mut f = std::fs::File::create(path).unwrap();
    for (i, r) in runs {
        writeln!(f, "{}", line(*i, r)).unwrap();
    }
    path.to_path_buf()
}

fn ingest_files(store: &Arc<dyn GraphStore>, files: Vec<PathBuf>, rt: &tokio::runtime::Runtime) {
    let settings = toolgraph_engine::settings::load(None, &[("ingest.batch_size", "3".into())]).unwrap();
    rt.block_on(ingest(
        store.clone(),
        Inputs { trajectories: files, ..Default::default() },
        &settings,
        Arc::new(NoProgress),
    ))
    .unwrap();
}

fn snapshot(store: &Arc<dyn GraphStore>, rt: &tokio::runtime::Runtime) -> GraphSnapshot {
    rt.block_on(store.snapshot()).unwrap()
}

fn run_strategy() -> impl Strategy<Value = Run> {
    (prop::collection::vec((0..APIS.len(), prop::bool::weighted(0.8)), 1..6), prop::bool::weighted(0.85))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn ingesting_twice_or_in_pieces_equals_ingesting_once(
        runs in prop::collection::vec(run_strategy(), 1..25),
        split in 0usize..25,
        overlap in 0usize..5,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let numbered: Vec<(usize, Run)> = runs.into_iter().enumerate().collect();
        let all = write_runs(&dir.path().join("all.jsonl"), &numbered);

        let once: Arc<dyn GraphStore> = Arc::new(EmbeddedStore::open(&dir.path().join("once.redb")).unwrap());
        ingest_files(&once, vec![all.clone()], &rt);
        let once_snap = snapshot(&once, &rt);

        let twice: Arc<dyn GraphStore> = Arc::new(EmbeddedStore::open(&dir.path().join("twice.redb")).unwrap());
        ingest_files(&twice, vec![all.clone()], &rt);
        ingest_files(&twice, vec![all.clone()], &rt);
        prop_assert_eq!(&once_snap, &snapshot(&twice, &rt));

        let cut = split.min(numbered.len());
        let first = write_runs(&dir.path().join("a.jsonl"), &numbered[..(cut + overlap).min(numbered.len())]);
        let second = write_runs(&dir.path().join("b.jsonl"), &numbered[cut.saturating_sub(overlap)..]);
        let pieces: Arc<dyn GraphStore> = Arc::new(EmbeddedStore::open(&dir.path().join("pieces.redb")).unwrap());
        ingest_files(&pieces, vec![first], &rt);
        ingest_files(&pieces, vec![second], &rt);
        prop_assert_eq!(&once_snap, &snapshot(&pieces, &rt));

        // And successors' weights sum to 1 wherever there are successors.
        let mut sums = std::collections::BTreeMap::<&str, f64>::new();
        for ((from, _), e) in &once_snap.next {
            *sums.entry(from.as_str()).or_default() += e.static_weight;
        }
        for (from, s) in sums {
            prop_assert!((s - 1.0).abs() < 1e-9, "{} sums to {}", from, s);
        }
    }
}

#[test]
fn a_stopped_ingest_finishes_what_it_read_and_a_rerun_completes_it() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<(usize, Run)> = (0..40).map(|i| (i, (vec![(i % 5, true), ((i + 1) % 5, true)], true))).collect();
    let all = write_runs(&dir.path().join("all.jsonl"), &runs);
    let settings = toolgraph_engine::settings::load(None, &[("ingest.batch_size", "3".into())]).unwrap();

    let stopped: Arc<dyn GraphStore> = Arc::new(EmbeddedStore::open(&dir.path().join("stopped.redb")).unwrap());
    let inputs = Inputs { trajectories: vec![all.clone()], ..Default::default() };
    inputs.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let report = rt.block_on(ingest(stopped.clone(), inputs, &settings, Arc::new(NoProgress))).unwrap();
    assert!(report.interrupted);
    assert_eq!(report.tally.runs_read, 1, "reading stops at the first record");
    let partial = snapshot(&stopped, &rt);
    assert_eq!(partial.next.values().map(|e| e.count).sum::<u64>(), 3, "the record read was written: START→a→b→END");
    assert!(!rt.block_on(stopped.weights_dirty()).unwrap(), "derived data was finished");

    ingest_files(&stopped, vec![all.clone()], &rt);
    let once: Arc<dyn GraphStore> = Arc::new(EmbeddedStore::open(&dir.path().join("once.redb")).unwrap());
    ingest_files(&once, vec![all], &rt);
    assert_eq!(snapshot(&once, &rt), snapshot(&stopped, &rt));
}
