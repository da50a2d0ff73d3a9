//! ToolBench answers re-planned (`../shared/data/toolbench/answer`): every answer file's query is
//! planned again over a tool graph learned from the *other* answer files (k-fold over the files),
//! with the tools' docs from `toolenv/tools.jsonl.gz` (only the tools the answers use), and
//! **executed** against the replay sandbox serving that answer's recorded observations (every
//! Action of its tree that got a normal observation, `observation_code` 0): a call the recorded
//! run never made gets the sandbox's "no result" error, as an API that cannot answer.
//!
//! **Pass rate** is ToolEval's measure, a query passed when it was solved; here it is judged by
//! the engine's judge (`answered`: every call usable and every part of the query covered) — with
//! `--planner llm` the judge is the model's (toolgraph's judge prompt, not ToolEval's). ToolEval
//! asks ChatGPT whether the final answer solves the query; no model can be reached here, so the
//! rows say which judge made them. The recorded runs' own outcome (`finish_type` give_answer) is
//! shown beside them as the reference.

use crate::chains::HarnessOptions;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::{ExecSettings, Executor};
use toolgraph_engine::retrieval::hybrid::Retriever;
use toolgraph_engine::run::{RunSettings, Status};
use toolgraph_engine::stack::Stack;
use toolgraph_ingest::catalog::{Catalog, Resolution};
use toolgraph_ingest::pipeline::{Inputs, NoProgress};
use toolgraph_ingest::IngestError;
use toolgraph_sandbox::{self as sandbox, Faults, Library, Recording, Sandbox};
use toolgraph_schema::{toolbench_standardize, Settings};

/// One recorded call of an answer's tree.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedAction {
    pub function: String,
    pub arguments: Map<String, Value>,
    pub observation: Value,
}

/// One answer file: its query, the tools it could use, its recorded calls.
#[derive(Debug, Clone)]
pub struct AnswerFile {
    pub path: PathBuf,
    pub query: String,
    /// Standardized names of the tools its functions belong to.
    pub tools: BTreeSet<String>,
    pub actions: Vec<RecordedAction>,
    /// The recorded run gave an answer (`finish_type` give_answer).
    pub answered: bool,
}

fn schema_tool(desc: &str) -> Option<String> {
    let marker = "subfunction for tool \"";
    let start = desc.find(marker)? + marker.len();
    let end = desc[start..].find('"')? + start;
    Some(desc[start..end].to_string())
}

/// The observation as JSON (ToolBench writes `{"error": "", "response": "..."}` as text).
fn observation_value(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        other => other.clone(),
    }
}

fn walk(node: &Value, out: &mut Vec<RecordedAction>) {
    // An Action node names the function; its Action Input child holds the arguments and the
    // observation.
    if node.get("node_type").and_then(Value::as_str) == Some("Action") {
        let function = node.get("description").and_then(Value::as_str).unwrap_or_default().to_string();
        for input in node.get("children").and_then(Value::as_array).into_iter().flatten() {
            if input.get("node_type").and_then(Value::as_str) != Some("Action Input") || function == "Finish" {
                continue;
            }
            let code = input.get("observation_code").and_then(Value::as_i64);
            let obs = input.get("observation").filter(|o| !o.is_null());
            if let (Some(0), Some(obs)) = (code, obs) {
                let arguments = input
                    .get("description")
                    .and_then(Value::as_str)
                    .and_then(|d| serde_json::from_str::<Value>(d).ok())
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                out.push(RecordedAction { function: function.clone(), arguments, observation: observation_value(obs) });
            }
        }
    }
    for c in node.get("children").and_then(Value::as_array).into_iter().flatten() {
        walk(c, out);
    }
}

/// Read one answer file (DFSDT tree; CoT `trys` files carry no tree and are read without calls).
pub fn read_answer(path: &Path) -> Result<AnswerFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let ag = v.get("answer_generation").ok_or_else(|| format!("{}: no answer_generation", path.display()))?;
    let query = ag
        .get("query")
        .and_then(Value::as_str)
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| format!("{}: answer_generation.query is missing", path.display()))?
        .trim()
        .to_string();
    let tools = ag
        .get("function")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.get("description").and_then(Value::as_str).and_then(schema_tool))
        .collect();
    let mut actions = Vec::new();
    if let Some(t) = v.get("tree").and_then(|t| t.get("tree")) {
        walk(t, &mut actions);
    }
    let answered = ag.get("finish_type").and_then(Value::as_str) == Some("give_answer");
    Ok(AnswerFile { path: path.to_path_buf(), query, tools, actions, answered })
}

/// Every `*.json` under `root`, sorted.
pub fn answer_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The lines of `tools.jsonl(.gz)` whose tool the answers use, written to `out`; how many.
pub fn filter_tools(tools: &Path, wanted: &BTreeSet<String>, out: &Path) -> Result<usize, IngestError> {
    let io = |e: std::io::Error| IngestError::Input(format!("{}: {e}", tools.display()));
    let f = std::fs::File::open(tools).map_err(io)?;
    let reader: Box<dyn BufRead> = if tools.extension().is_some_and(|x| x == "gz") {
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(f)))
    } else {
        Box::new(std::io::BufReader::new(f))
    };
    let mut w = std::io::BufWriter::new(std::fs::File::create(out).map_err(io)?);
    let mut n = 0;
    for line in reader.lines() {
        let line = line.map_err(io)?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
        let name = v.get("tool_name").and_then(Value::as_str).map(toolbench_standardize).unwrap_or_default();
        if wanted.contains(&name) {
            writeln!(w, "{line}").map_err(io)?;
            n += 1;
        }
    }
    w.flush().map_err(io)?;
    Ok(n)
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolBenchScores {
    pub method: String,
    pub queries: usize,
    /// Answered by the engine's judge (see the module).
    pub pass_rate: f64,
    pub partial: usize,
    pub gave_up: usize,
    /// Calls answered by a recorded observation, per query.
    pub replayed_calls_mean: f64,
    pub http_calls_mean: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolBenchDetail {
    pub method: String,
    pub file: String,
    pub status: String,
    pub chain: Vec<String>,
    pub recorded_answered: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolBenchReport {
    pub files: usize,
    pub folds: usize,
    pub tools: usize,
    /// The recorded runs that gave an answer (the reference).
    pub recorded_pass_rate: f64,
    pub judge: String,
    pub methods: Vec<ToolBenchScores>,
    pub details: Vec<ToolBenchDetail>,
    pub skipped: Vec<String>,
    pub seconds: f64,
}

/// Options: the answer folder and the tool docs, folds, methods.
pub struct ToolBenchOptions {
    pub answers: PathBuf,
    pub tools: PathBuf,
    pub harness: HarnessOptions,
}

/// One fold's graph, API vectors and retriever, learned from the training answer files.
async fn learn_fold(
    fold: &std::path::Path,
    train: Vec<PathBuf>,
    tools_path: &std::path::Path,
    settings: &Settings,
    embedder: &Arc<dyn Embedder>,
    cache: Option<Arc<toolgraph_engine::retrieval::cache::EmbeddingCache>>,
) -> Result<(Stack, Arc<Retriever>), IngestError> {
    let stack = Stack::embedded_in(fold, settings, embedder.clone(), cache).await?;
    toolgraph_engine::ingest::ingest(
        &stack,
        Inputs { toolbench: train, tools: vec![tools_path.to_path_buf()], ..Inputs::default() },
        Arc::new(NoProgress),
    )
    .await?;
    stack.index(false).await?;
    let retriever = stack.retriever().await?;
    Ok((stack, retriever))
}

/// The recorded observations of one query, on the routes of the APIs they came from.
fn recordings_of(
    a: &AnswerFile,
    catalog: &Catalog,
    snapshot: &toolgraph_schema::GraphSnapshot,
    skipped: &mut Vec<String>,
) -> Vec<Recording> {
    let mut recs = Vec::new();
    for act in &a.actions {
        let id = match catalog.resolve_function(&act.function, &a.tools) {
            Resolution::Found(id) => id,
            Resolution::Ambiguous(ids) => ids[0].clone(),
            Resolution::Unknown => {
                skipped.push(format!("{}: `{}` matches no documented API", a.path.display(), act.function));
                continue;
            }
        };
        let Some(node) = snapshot.apis.get(&id).filter(|n| !n.url.is_empty()) else { continue };
        let route = node.url.split_once("://").map(|(_, r)| r).unwrap_or(&node.url).to_string();
        recs.push(Recording {
            api: node.name.clone(),
            route,
            required: node.required.clone(),
            arguments: act.arguments.clone(),
            response: act.observation.clone(),
        });
    }
    recs
}

/// Per method: queries, answered, partial, gave up; replayed calls and calls per query.
type Tally = (usize, usize, usize, usize, Vec<f64>, Vec<f64>);

fn scores(methods: &[crate::chains::EvalMethod], tallies: &[Tally]) -> Vec<ToolBenchScores> {
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    methods
        .iter()
        .zip(tallies)
        .map(|(m, t)| ToolBenchScores {
            method: m.name.clone(),
            queries: t.0,
            pass_rate: t.1 as f64 / t.0.max(1) as f64,
            partial: t.2,
            gave_up: t.3,
            replayed_calls_mean: mean(&t.4),
            http_calls_mean: mean(&t.5),
        })
        .collect()
}

/// Re-plan every answer file's query held-out and execute it against its recorded observations.
pub async fn run(
    opts: &ToolBenchOptions,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    mut progress: impl FnMut(usize, usize),
) -> Result<ToolBenchReport, IngestError> {
    let started = std::time::Instant::now();
    let mut report = ToolBenchReport {
        folds: opts.harness.folds,
        judge: opts.harness.planner.as_ref().map(|p| p.name().to_string()).unwrap_or_else(|| "deterministic".into()),
        ..Default::default()
    };
    let mut files = Vec::new();
    for p in answer_files(&opts.answers) {
        match read_answer(&p) {
            Ok(a) => files.push(a),
            Err(e) => report.skipped.push(e),
        }
    }
    let dir = tempfile::tempdir().map_err(|e| IngestError::Input(format!("cannot create a temporary folder: {e}")))?;
    let wanted: BTreeSet<String> = files.iter().flat_map(|f| f.tools.iter().cloned()).collect();
    let tools_path = dir.path().join("tools.jsonl");
    report.tools = filter_tools(&opts.tools, &wanted, &tools_path)?;
    report.files = files.len();
    report.recorded_pass_rate = files.iter().filter(|f| f.answered).count() as f64 / files.len().max(1) as f64;
    let cache = opts.harness.open_cache()?;
    let k = opts.harness.folds.max(2).min(files.len().max(2));
    let mut tallies: Vec<Tally> = opts.harness.methods.iter().map(|_| Default::default()).collect();
    let total = (0..k)
        .map(|f| (0..files.len()).filter(|i| i % k == f).take(opts.harness.limit.unwrap_or(usize::MAX)).count())
        .sum::<usize>()
        * opts.harness.methods.len();
    let mut done = 0;
    for f in 0..k {
        let test: Vec<&AnswerFile> = files
            .iter()
            .enumerate()
            .filter(|(i, _)| i % k == f)
            .map(|(_, a)| a)
            .take(opts.harness.limit.unwrap_or(usize::MAX))
            .collect();
        if test.is_empty() {
            continue;
        }
        let train: Vec<PathBuf> =
            files.iter().enumerate().filter(|(i, _)| i % k != f).map(|(_, a)| a.path.clone()).collect();
        let fold = dir.path().join(format!("fold{f}"));
        std::fs::create_dir_all(&fold).map_err(|e| IngestError::Input(format!("{}: {e}", fold.display())))?;
        let (stack, retriever) = learn_fold(&fold, train, &tools_path, settings, &embedder, cache.clone()).await?;
        let snapshot = Arc::new(stack.store.snapshot().await?);
        // Memory stays off (use_memory: false); the executor is each query's own.
        let mut stack = stack.with_planner(opts.harness.planner());
        let catalog = Catalog::from_snapshot(&snapshot);
        for a in &test {
            let recs = recordings_of(a, &catalog, &snapshot, &mut report.skipped);
            let sb = Sandbox::new(Library::new(recs), Faults::default());
            let (addr, stop) = sandbox::spawn("127.0.0.1:0", sb.clone())
                .await
                .map_err(|e| IngestError::Input(format!("cannot start the replay sandbox: {e}")))?;
            stack.executor = Executor::new(ExecSettings {
                rewrites: vec![("https://".into(), format!("http://{addr}/"))],
                timeout_ms: 5_000,
                retries: 0,
                allow_private: vec!["127.0.0.1/32".into()],
                ..ExecSettings::default()
            })?;
            for (mi, method) in opts.harness.methods.iter().enumerate() {
                let run_settings = RunSettings {
                    mode: method.mode,
                    backward: method.backward,
                    use_memory: false,
                    remember: false,
                    learn: false,
                    ..opts.harness.run.clone()
                };
                let engine = stack.engine_over(snapshot.clone(), retriever.clone(), run_settings, None);
                let before = sb.stats().served;
                let r = engine.run(&a.query, Map::new(), None).await?;
                let t = &mut tallies[mi];
                t.0 += 1;
                match r.status {
                    Status::Answered => t.1 += 1,
                    Status::Partial => t.2 += 1,
                    Status::GaveUp | Status::NeedsInput => t.3 += 1,
                }
                t.4.push((sb.stats().served - before) as f64);
                t.5.push(r.stats.http_calls as f64);
                report.details.push(ToolBenchDetail {
                    method: method.name.clone(),
                    file: a.path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
                    status: r.status.as_str().into(),
                    chain: r.chain.iter().map(|c| c.name.clone()).collect(),
                    recorded_answered: a.answered,
                });
                done += 1;
                progress(done, total);
            }
            let _ = stop.send(());
        }
    }
    report.methods = scores(&opts.harness.methods, &tallies);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

pub fn markdown(r: &ToolBenchReport) -> String {
    let mut s = format!(
        "## ToolBench answers re-planned ({} answer files, {} tools' docs; {}-fold over the files; executed against each answer's recorded observations)\n\nPass rate as ToolEval defines it (the query solved), **judged by toolgraph's `{}` judge** — not ToolEval's ChatGPT judge. The recorded runs themselves gave an answer in {:.2} % of the files.\n\n| method | Pass Rate (engine judge) | partial | gave up | replayed calls / query | calls / query |\n|---|---:|---:|---:|---:|---:|\n",
        r.files, r.tools, r.folds, r.judge, 100.0 * r.recorded_pass_rate
    );
    for m in &r.methods {
        s.push_str(&format!(
            "| **toolgraph `{}`** | **{:.2}** | {} | {} | {:.2} | {:.2} |\n",
            m.method,
            100.0 * m.pass_rate,
            m.partial,
            m.gave_up,
            m.replayed_calls_mean,
            m.http_calls_mean
        ));
    }
    s.push_str(&crate::report::skipped_md("item", &r.skipped));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recorded_actions_are_read_from_the_tree_with_parsed_observations() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        let tree = json!({"node_type": "Action Input", "children": [
            {"node_type": "Action", "description": "list_for_cats", "children": [
                {"node_type": "Action Input", "description": "{\"breed\": \"siamese\"}", "observation": "{\"error\": \"\", \"response\": \"[1]\"}", "observation_code": 0, "children": [
                    {"node_type": "Action", "description": "broken_for_cats", "children": [{"node_type": "Action Input", "description": "{}", "observation": "{\"error\": \"timeout\"}", "observation_code": 5, "children": []}]},
                    {"node_type": "Action", "description": "Finish", "children": [{"node_type": "Action Input", "description": "{}", "observation": "{}", "observation_code": 3, "children": []}]}
                ]}
            ]}
        ]});
        let answer = json!({"answer_generation": {"query": " Which cats? ", "finish_type": "give_answer", "function": [{"name": "list_for_cats", "description": "This is the subfunction for tool \"cats\", you can use this tool."}]}, "tree": {"tree": tree}});
        std::fs::write(&p, answer.to_string()).unwrap();
        let a = read_answer(&p).unwrap();
        assert_eq!(a.query, "Which cats?");
        assert!(a.answered);
        assert_eq!(a.tools, ["cats".to_string()].into_iter().collect());
        // Only the normal observation is a recording; the timeout and Finish are not.
        assert_eq!(
            a.actions,
            vec![RecordedAction {
                function: "list_for_cats".into(),
                arguments: json!({"breed": "siamese"}).as_object().unwrap().clone(),
                observation: json!({"error": "", "response": "[1]"})
            }]
        );
        std::fs::write(&p, "{\"answer_generation\": {}}").unwrap();
        assert!(read_answer(&p).unwrap_err().contains("query"));
    }
}
