//! The ingest pipeline: docs → catalog → trajectories → batches → store, then weights and FEEDS.
//!
//! A blocking thread reads and parses (CPU work off the reactor) and hands batches over a bounded
//! channel to the writer. Each batch's counts are applied together with the keys of its runs, so a
//! re-run, or a run after a crash, skips what was already counted: ingesting twice equals ingesting
//! once. Derived weights are marked stale before counts change and recomputed at the end (all of
//! them when an earlier ingest stopped before doing so).

use crate::catalog::{self, Catalog};
use crate::error::{IngestError, RecordError};
use crate::feeds;
use crate::read::{self, Line};
use crate::report::{EdgeCounts, IngestReport, NodeCounts, Tally};
use crate::runs::{self, Sink};
use crate::transcripts;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use toolgraph_graph::write::{ContributionWriter, ExampleSink};
use toolgraph_graph::{weights, ApiUpsert, GraphStore};
use toolgraph_schema::{Contribution, Settings, END_ID, START_ID};

/// What to ingest.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// ToolBench answer folders or files (`*.json`, searched recursively).
    pub toolbench: Vec<PathBuf>,
    /// ToolBench / StableToolBench query files (their `api_list` documents APIs).
    pub queries: Vec<PathBuf>,
    /// Tool docs: `tools.jsonl(.gz)` or a ToolBench `tools/` folder.
    pub tools: Vec<PathBuf>,
    /// JSONL trajectories: toolgraph runs and OpenAI-style chat transcripts, line by line.
    pub trajectories: Vec<PathBuf>,
    /// Set to stop early (Ctrl-C): reading stops, what was read is written and finished.
    pub stop: Arc<AtomicBool>,
    /// Learns from each new answered run's request and arguments (the engine's argument model:
    /// `toolgraph_engine::ingest` sets it; callers go through that); its counts are applied with
    /// each batch's. `None` learns nothing.
    pub learner: Option<Learner>,
}

/// An [`ExampleSink`] for [`Inputs::learner`].
#[derive(Clone)]
pub struct Learner(pub Arc<dyn ExampleSink>);

impl std::fmt::Debug for Learner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Learner")
    }
}

/// Progress reporting; the binary draws a bar or logs lines.
pub trait Progress: Send + Sync {
    fn phase(&self, name: &str, total: Option<u64>);
    fn advance(&self, n: u64);
    fn finish(&self);
}

/// Reports nothing.
pub struct NoProgress;
impl Progress for NoProgress {
    fn phase(&self, _: &str, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// One unit of work for the writer.
struct Batch {
    apis: Vec<ApiUpsert>,
    runs: Vec<Contribution>,
}

/// What the reader thread found.
struct ReadOutcome {
    catalog: Catalog,
    tally: Tally,
    errors: Vec<RecordError>,
    errors_total: u64,
    files_read: u64,
    doc_records: u64,
    apis_from_docs: u64,
}

/// The ToolBench answer files under `roots`, sorted.
pub fn toolbench_files(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for root in roots {
        if root.is_file() {
            files.push(root.clone());
            continue;
        }
        files.extend(
            walkdir::WalkDir::new(root)
                .into_iter()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "json"))
                .map(|e| e.into_path()),
        );
    }
    files.sort();
    files
}

struct Reader {
    catalog: Catalog,
    tally: Tally,
    errors: Vec<RecordError>,
    errors_total: u64,
    max_errors: usize,
    max_record: u64,
    batch_size: usize,
    pending: Vec<Contribution>,
    stop: Arc<AtomicBool>,
    tx: tokio::sync::mpsc::Sender<Batch>,
    progress: Arc<dyn Progress>,
}

impl Reader {
    fn outcome(self, files_read: u64, doc_records: u64, apis_from_docs: u64) -> ReadOutcome {
        ReadOutcome {
            catalog: self.catalog,
            tally: self.tally,
            errors: self.errors,
            errors_total: self.errors_total,
            files_read,
            doc_records,
            apis_from_docs,
        }
    }

    fn keep_errors(&mut self, errs: Vec<RecordError>) {
        for e in errs {
            self.errors_total += 1;
            tracing::warn!(target: "ingest", "{e}");
            if self.errors.len() < self.max_errors {
                self.errors.push(e);
            }
        }
    }

    /// Send pending runs and catalog changes. False when the writer has stopped.
    fn flush(&mut self) -> bool {
        let apis = self.catalog.drain_changes();
        let runs = std::mem::take(&mut self.pending);
        if apis.is_empty() && runs.is_empty() {
            return true;
        }
        self.tx.blocking_send(Batch { apis, runs }).is_ok()
    }

    /// Queue a record's contribution. False when reading must stop (writer gone, or asked to).
    fn push(&mut self, c: Option<Contribution>) -> bool {
        if let Some(c) = c {
            self.pending.push(c);
        }
        self.progress.advance(1);
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        if self.pending.len() >= self.batch_size {
            return self.flush();
        }
        true
    }

    fn record(&mut self, f: impl FnOnce(&mut Catalog, &mut Sink) -> Option<Contribution>) -> bool {
        let mut errs = Vec::new();
        let c = {
            let mut sink = Sink { tally: &mut self.tally, errors: &mut errs };
            f(&mut self.catalog, &mut sink)
        };
        self.keep_errors(errs);
        self.push(c)
    }

    fn answer_file(&mut self, path: &Path) -> bool {
        match read::read_document(path, self.max_record) {
            Ok(bytes) => self.record(|cat, sink| runs::toolbench_answer(path, &bytes, cat, sink)),
            Err(e) => {
                self.tally.runs_read += 1;
                let reason = if e.message.starts_with("larger") {
                    crate::report::run_drop::TOO_LARGE
                } else {
                    crate::report::run_drop::EMPTY
                };
                self.tally.drop_run(reason);
                self.keep_errors(vec![e]);
                self.push(None)
            }
        }
    }

    fn jsonl_file(&mut self, path: &Path) -> bool {
        let lines = match read::Lines::open(path, self.max_record) {
            Ok(l) => l,
            Err(e) => {
                self.keep_errors(vec![RecordError::new(path, "file", format!("cannot read: {e}"))]);
                return true;
            }
        };
        let mut any = false;
        for line in lines {
            let ok = match line {
                Err(e) => {
                    self.keep_errors(vec![RecordError::new(path, "file", format!("read failed: {e}"))]);
                    break;
                }
                Ok(Line::TooLong { number, len }) => {
                    any = true;
                    self.tally.runs_read += 1;
                    self.tally.drop_run(crate::report::run_drop::TOO_LARGE);
                    let msg = format!("record of {len} bytes is over the {}-byte limit; skipped", self.max_record);
                    self.keep_errors(vec![RecordError::new(path, format!("line {number}"), msg)]);
                    self.push(None)
                }
                Ok(Line::Record { number, bytes }) => {
                    any = true;
                    // A line is a toolgraph run or a chat transcript (it has `messages`).
                    if transcripts::is_transcript(&bytes) {
                        self.record(|cat, sink| transcripts::transcript(path, number, &bytes, cat, sink))
                    } else {
                        self.record(|cat, sink| runs::jsonl_run(path, number, &bytes, cat, sink))
                    }
                }
            };
            if !ok {
                return false;
            }
        }
        if !any {
            self.keep_errors(vec![RecordError::new(path, "file", "empty file: no runs")]);
        }
        true
    }
}

fn read_all(
    inputs: Inputs,
    catalog: Catalog,
    settings: &Settings,
    tx: tokio::sync::mpsc::Sender<Batch>,
    progress: Arc<dyn Progress>,
) -> ReadOutcome {
    let mut r = Reader {
        catalog,
        tally: Tally::default(),
        errors: Vec::new(),
        errors_total: 0,
        max_errors: settings.ingest.max_reported_errors,
        max_record: settings.ingest.max_record_bytes,
        batch_size: settings.ingest.batch_size,
        pending: Vec::new(),
        stop: inputs.stop.clone(),
        tx,
        progress: progress.clone(),
    };
    let (mut files_read, mut doc_records, mut apis_from_docs) = (0, 0, 0);
    progress.phase("tool docs", Some((inputs.tools.len() + inputs.queries.len()) as u64));
    let mut loads = Vec::new();
    for t in &inputs.tools {
        loads.push(catalog::load_tools(&mut r.catalog, t, r.max_record));
        progress.advance(1);
    }
    for q in &inputs.queries {
        loads.push(catalog::load_queries(&mut r.catalog, q, r.max_record));
        progress.advance(1);
    }
    for l in loads {
        files_read += l.files;
        doc_records += l.records;
        apis_from_docs += l.apis;
        r.keep_errors(l.errors);
    }
    if !r.flush() {
        return r.outcome(files_read, doc_records, apis_from_docs);
    }

    let answers = toolbench_files(&inputs.toolbench);
    progress.phase("trajectories", Some(answers.len() as u64).filter(|_| inputs.trajectories.is_empty()));
    let mut going = true;
    for f in &answers {
        files_read += 1;
        going = r.answer_file(f);
        if !going {
            break;
        }
    }
    if going {
        for f in &inputs.trajectories {
            files_read += 1;
            if !r.jsonl_file(f) {
                break;
            }
        }
    }
    // Whatever was read is written, also when stopped early (a no-op if the writer is gone).
    r.flush();
    r.outcome(files_read, doc_records, apis_from_docs)
}

pub use toolgraph_graph::aggregate;

/// Run an ingest into `store`.
pub async fn ingest(
    store: Arc<dyn GraphStore>,
    inputs: Inputs,
    settings: &Settings,
    progress: Arc<dyn Progress>,
) -> Result<IngestReport, IngestError> {
    let started = Instant::now();
    weights::validate(settings.weights)?;
    let was_dirty = store.weights_dirty().await?;
    let snapshot = store.node_snapshot().await?;
    let catalog = Catalog::from_snapshot(&snapshot);
    drop(snapshot);

    let stop = inputs.stop.clone();
    let learner = inputs.learner.clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Batch>(4);
    let reader_settings = settings.clone();
    let reader_progress = progress.clone();
    let reader = tokio::task::spawn_blocking(move || read_all(inputs, catalog, &reader_settings, tx, reader_progress));

    let mut apis_written = 0u64;
    let mut changed_tools: BTreeSet<String> = BTreeSet::new();
    let mut writer = ContributionWriter::new(store.as_ref()).with_sink(learner.as_ref().map(|l| l.0.as_ref()));
    let mut write_result: Result<(), IngestError> = Ok(());

    while let Some(batch) = rx.recv().await {
        let step = async {
            if !batch.apis.is_empty() || !batch.runs.is_empty() {
                // Derived data (weights, FEEDS) is stale from the first write until the end.
                writer.mark_dirty().await?;
            }
            if !batch.apis.is_empty() {
                store.upsert_apis(&batch.apis).await?;
                apis_written += batch.apis.len() as u64;
                changed_tools.extend(batch.apis.iter().map(|a| a.tool_id.clone()));
            }
            if !batch.runs.is_empty() {
                // What the argument model learns from the batch is applied with its counts.
                writer.write(batch.runs).await?;
            }
            Ok::<(), IngestError>(())
        }
        .await;
        if let Err(e) = step {
            write_result = Err(e);
            break;
        }
    }
    drop(rx); // stops the reader if the writer failed
    let read = reader.await.map_err(|e| IngestError::Input(format!("reader thread failed: {e}")))?;
    write_result?;
    progress.finish();

    // Derived data: all of it if an earlier ingest stopped before finishing, else what this one touched.
    let weights_recomputed = writer.recompute(settings.weights, settings.store.batch_rows, was_dirty).await?;
    let feeds_rows = if was_dirty {
        let all_tools: BTreeSet<String> = read.catalog.apis().map(|d| d.tool_id()).collect();
        let all_pairs: BTreeSet<(String, String)> = store
            .edge_counts(None)
            .await?
            .into_iter()
            .filter(|e| e.from != START_ID && e.to != END_ID)
            .map(|e| (e.from, e.to))
            .collect();
        feeds::derive(&read.catalog, &all_tools, &all_pairs)
    } else {
        feeds::derive(&read.catalog, &changed_tools, &writer.pairs)
    };
    store.upsert_feeds(&feeds_rows).await?;
    if was_dirty || writer.marked_dirty() {
        writer.clear_dirty().await?;
    }

    let arg_examples = learner.as_ref().map_or(0, |l| l.0.learned());
    let stats = store.stats().await?;
    let interrupted = stop.load(Ordering::Relaxed);
    let mut tally = read.tally;
    tally.runs_already_ingested = writer.already;
    let elapsed = started.elapsed().as_secs_f64();
    Ok(IngestReport {
        store: store.backend().to_string(),
        interrupted,
        files_read: read.files_read,
        doc_records_read: read.doc_records,
        apis_from_docs: read.apis_from_docs,
        apis_written,
        runs_per_s: if elapsed > 0.0 { tally.runs_read as f64 / elapsed } else { 0.0 },
        tally,
        nodes: NodeCounts { apis: stats.apis, tools: stats.tools, categories: stats.categories },
        edges: EdgeCounts { next: stats.next_edges, feeds: stats.feeds_edges },
        weights_recomputed: weights_recomputed as u64,
        feeds_written: feeds_rows.len() as u64,
        arg_examples,
        memories: 0,
        elapsed_s: elapsed,
        errors_total: read.errors_total,
        errors: read.errors,
    })
}
