//! TaskBench (Shen et al., 2024, "TaskBench: Benchmarking Large Language Models for Task
//! Automation"), Daily Life APIs: the gold records at hand (`gold_sample_transcribed/`, 26 of the
//! ~4.3k upstream records, hand-transcribed: see its README) over the domain's 40 tools
//! (`data_dailylifeapis/tool_desc.json`), planned held-out by k-fold (plan only, see `planned`) and
//! scored as the benchmark's `evaluate.py` scores this domain (`--ignore_tool_type`: links and
//! arguments as given):
//!
//! - **n-F1** (node F1): per sample the set of tools, gold ∪ predicted; each element counts as a
//!   true positive (in both), false positive (predicted only) or false negative (gold only) of its
//!   tool's class; a predicted name that is no tool of the domain is ignored; micro F1 over the
//!   classes.
//! - **e-F1** (edge/link F1): per sample the set of `(source, target)` links, gold ∪ predicted;
//!   binary F1 over all of them.
//! - **t-F1** / **v-F1**: the same over `tool-argument` and `tool-argument-value` strings (values
//!   as Python's `str()` writes them).
//!
//! toolgraph's links: a call that takes an earlier call's output (a `$varN…$` reference) is linked
//! from it; any other call after the first is linked from the call before it (Daily Life's links
//! are "the next task runs once this one completed").

use crate::chains::HarnessOptions;
use crate::nestful::py_str;
use crate::planned::{plan_folds, MethodPlans, PlannedCall};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::refs;
use toolgraph_ingest::complexfuncbench::{Chain, ChainCall, Spec, SpecParam};
use toolgraph_ingest::IngestError;
use toolgraph_schema::Settings;

/// The domain's gold records and tool list under TaskBench's folder.
pub const GOLD: &str = "gold_sample_transcribed/dailylifeapis_data_first26.jsonl";
pub const TOOLS: &str = "data_dailylifeapis/tool_desc.json";

/// A tool graph as the metrics see it: nodes (tool name, arguments) and links.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskGraph {
    pub nodes: Vec<(String, Vec<(String, Value)>)>,
    pub links: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    id: String,
    instruction: String,
    #[serde(default, rename = "type")]
    kind: String,
    task_nodes: Vec<Node>,
    #[serde(default)]
    task_links: Vec<Link>,
}

#[derive(Deserialize)]
struct Node {
    task: String,
    #[serde(default)]
    arguments: Vec<Argument>,
}

#[derive(Deserialize)]
struct Argument {
    name: String,
    value: Value,
}

#[derive(Deserialize)]
struct Link {
    source: String,
    target: String,
}

#[derive(Deserialize)]
struct ToolDesc {
    nodes: Vec<ToolNode>,
}

#[derive(Deserialize)]
struct ToolNode {
    id: String,
    #[serde(default)]
    desc: String,
    #[serde(default)]
    parameters: Vec<ToolParam>,
}

#[derive(Deserialize)]
struct ToolParam {
    name: String,
    #[serde(default, rename = "type")]
    ty: String,
    #[serde(default)]
    desc: String,
}

/// One gold sample: its request (as a chain for learning) and its gold graph.
pub struct Sample {
    pub id: String,
    pub kind: String,
    pub chain: Chain,
    pub gold: TaskGraph,
}

/// The tools as specs (every argument required: TaskBench's tools take all of theirs).
pub fn read_tools(path: &Path) -> Result<Vec<Spec>, IngestError> {
    let text = std::fs::read_to_string(path).map_err(|e| IngestError::Input(format!("{}: {e}", path.display())))?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    let desc: ToolDesc = serde_path_to_error::deserialize(de)
        .map_err(|e| IngestError::Input(format!("{}: {}: {}", path.display(), e.path(), e.inner())))?;
    Ok(desc
        .nodes
        .into_iter()
        .map(|n| Spec {
            host: "dailylifeapis.taskbench".into(),
            endpoint: format!("/{}", n.id),
            query_parameters: n
                .parameters
                .into_iter()
                .map(|p| {
                    (
                        p.name,
                        SpecParam {
                            ty: if p.ty == "date" { "string".into() } else { p.ty },
                            description: p.desc,
                            required: true,
                            default: None,
                        },
                    )
                })
                .collect(),
            output_parameters: Map::new(),
            description: n.desc,
            name: n.id,
        })
        .collect())
}

/// The gold records (JSON lines); a bad line is skipped and named with its line number.
pub fn read_gold(path: &Path, skipped: &mut Vec<String>) -> Result<Vec<Sample>, IngestError> {
    let text = std::fs::read_to_string(path).map_err(|e| IngestError::Input(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let de = &mut serde_json::Deserializer::from_str(line);
        let r: Record = match serde_path_to_error::deserialize(de) {
            Ok(r) => r,
            Err(e) => {
                skipped.push(format!("{}:{}: {}: {}", path.display(), i + 1, e.path(), e.inner()));
                continue;
            }
        };
        let nodes: Vec<(String, Vec<(String, Value)>)> = r
            .task_nodes
            .into_iter()
            .map(|n| (n.task, n.arguments.into_iter().map(|a| (a.name, a.value)).collect()))
            .collect();
        let output = nodes
            .iter()
            .enumerate()
            .map(|(k, (task, args))| ChainCall {
                name: task.clone(),
                arguments: Value::Object(args.iter().cloned().collect()),
                label: Some(format!("var{}", k + 1)),
                errors: Vec::new(),
                response: None,
            })
            .collect();
        out.push(Sample {
            id: r.id,
            kind: r.kind,
            chain: Chain { input: r.instruction, output },
            gold: TaskGraph { nodes, links: r.task_links.into_iter().map(|l| (l.source, l.target)).collect() },
        });
    }
    Ok(out)
}

/// A plan as a task graph (links: see the module).
pub fn graph_of(calls: &[PlannedCall]) -> TaskGraph {
    let by_label: BTreeMap<&str, &str> = calls.iter().map(|c| (c.label.as_str(), c.name.as_str())).collect();
    let mut links = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        let mut from: BTreeSet<&str> = BTreeSet::new();
        for v in c.arguments.values() {
            if let Some(s) = v.as_str() {
                for r in refs::Reference::all_in(s) {
                    if let Some(n) = by_label.get(r.label.as_str()) {
                        from.insert(n);
                    }
                }
            }
        }
        if from.is_empty() && i > 0 {
            from.insert(calls[i - 1].name.as_str());
        }
        links.extend(from.into_iter().map(|f| (f.to_string(), c.name.clone())));
    }
    TaskGraph {
        nodes: calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
            .collect(),
        links,
    }
}

/// Micro F1 over `(gold, predicted)` rows, each row compared as sets; with `classes`, elements
/// outside them are ignored (both sides), as `evaluate.py`'s `flatten` with types does.
pub fn micro_f1<T: Ord + Clone>(rows: &[(Vec<T>, Vec<T>)], classes: Option<&BTreeSet<T>>) -> f64 {
    let (mut tp, mut fp, mut fn_) = (0usize, 0usize, 0usize);
    for (g, p) in rows {
        let g: BTreeSet<&T> = g.iter().collect();
        let p: BTreeSet<&T> = p.iter().collect();
        for x in g.union(&p) {
            if classes.is_some_and(|c| !c.contains(*x)) {
                continue;
            }
            match (g.contains(x), p.contains(x)) {
                (true, true) => tp += 1,
                (false, true) => fp += 1,
                (true, false) => fn_ += 1,
                (false, false) => {}
            }
        }
    }
    if tp == 0 {
        0.0
    } else {
        2.0 * tp as f64 / (2.0 * tp as f64 + fp as f64 + fn_ as f64)
    }
}

/// TaskBench's scores of one method.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskBenchScores {
    pub method: String,
    pub samples: usize,
    pub n_f1: f64,
    pub e_f1: f64,
    pub t_f1: f64,
    pub v_f1: f64,
    pub answered: usize,
    pub recalled: usize,
    pub engine_ms_p50: f64,
}

/// Score predicted graphs against gold graphs (same order); `tools`: the domain's tool names.
pub fn score(method: &str, gold: &[TaskGraph], pred: &[TaskGraph], tools: &BTreeSet<String>) -> TaskBenchScores {
    let names = |g: &TaskGraph| g.nodes.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    let arg_names = |g: &TaskGraph| {
        g.nodes.iter().flat_map(|(n, a)| a.iter().map(move |(k, _)| format!("{n}-{k}"))).collect::<Vec<_>>()
    };
    let arg_values = |g: &TaskGraph| {
        g.nodes
            .iter()
            .flat_map(|(n, a)| a.iter().map(move |(k, v)| format!("{n}-{k}-{}", py_str(v))))
            .collect::<Vec<_>>()
    };
    let rows =
        |f: &dyn Fn(&TaskGraph) -> Vec<String>| gold.iter().zip(pred).map(|(g, p)| (f(g), f(p))).collect::<Vec<_>>();
    type Links = Vec<(String, String)>;
    let links: Vec<(Links, Links)> = gold.iter().zip(pred).map(|(g, p)| (g.links.clone(), p.links.clone())).collect();
    TaskBenchScores {
        method: method.to_string(),
        samples: gold.len(),
        n_f1: micro_f1(&rows(&names), Some(tools)),
        e_f1: micro_f1(&links, None),
        t_f1: micro_f1(&rows(&arg_names), None),
        v_f1: micro_f1(&rows(&arg_values), None),
        ..Default::default()
    }
}

/// Published (TaskBench paper, Daily Life APIs, GPT-4): (model, n-F1, e-F1, t-F1, v-F1) in %.
pub const PUBLISHED: &[(&str, f64, f64, Option<f64>, f64)] = &[("GPT-4", 96.91, 80.53, None, 71.14)];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskBenchReport {
    pub samples: usize,
    pub folds: usize,
    pub tools: usize,
    pub methods: Vec<TaskBenchScores>,
    pub skipped: Vec<String>,
    pub seconds: f64,
    pub plans: Vec<MethodPlans>,
}

/// Plan the gold samples held-out with every method and score them.
pub async fn run(
    root: &Path,
    opts: &HarnessOptions,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    progress: impl FnMut(usize, usize),
) -> Result<TaskBenchReport, IngestError> {
    let started = std::time::Instant::now();
    let mut report = TaskBenchReport { folds: opts.folds, ..Default::default() };
    let specs = read_tools(&root.join(TOOLS))?;
    let tools: BTreeSet<String> = specs.iter().map(|s| s.name.clone()).collect();
    let samples = read_gold(&root.join(GOLD), &mut report.skipped)?;
    let mut usable = Vec::new();
    for s in samples {
        match s.gold.nodes.iter().find(|(n, _)| !tools.contains(n)) {
            Some((n, _)) => report.skipped.push(format!("sample {}: tool `{n}` is not in {TOOLS}", s.id)),
            None => usable.push(s),
        }
    }
    let chains: Vec<Chain> = usable.iter().map(|s| s.chain.clone()).collect();
    let plans = plan_folds(&chains, &specs, "Daily Life", opts, settings, embedder, progress).await?;
    for mp in &plans {
        let gold: Vec<TaskGraph> = mp.plans.iter().map(|p| usable[p.sample].gold.clone()).collect();
        let pred: Vec<TaskGraph> = mp.plans.iter().map(|p| graph_of(&p.calls)).collect();
        let mut s = score(&mp.method, &gold, &pred, &tools);
        s.answered = mp.plans.iter().filter(|p| p.status == "answered").count();
        s.recalled = mp.plans.iter().filter(|p| p.recalled).count();
        s.engine_ms_p50 = crate::planned::median(mp.plans.iter().map(|p| p.engine_ms).collect());
        report.methods.push(s);
    }
    report.samples = report.methods.first().map(|m| m.samples).unwrap_or(0);
    report.tools = tools.len();
    report.plans = plans;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The report as markdown: TaskBench's table with toolgraph's rows next to the published one.
pub fn markdown(r: &TaskBenchReport) -> String {
    let mut s = format!(
        "## TaskBench, Daily Life APIs ({} gold samples of the 26 at hand, {} tools; {}-fold, plan only)\n\n| model | n-F1 | e-F1 | t-F1 | v-F1 |\n|---|---:|---:|---:|---:|\n",
        r.samples, r.tools, r.folds
    );
    for (m, n, e, t, v) in PUBLISHED {
        s.push_str(&format!(
            "| {m} (published, all records) | {n:.2} | {e:.2} | {} | {v:.2} |\n",
            t.map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into())
        ));
    }
    for m in &r.methods {
        s.push_str(&format!(
            "| **toolgraph `{}`** | **{:.2}** | **{:.2}** | **{:.2}** | **{:.2}** |\n",
            m.method,
            100.0 * m.n_f1,
            100.0 * m.e_f1,
            100.0 * m.t_f1,
            100.0 * m.v_f1
        ));
    }
    s.push_str(&crate::report::skipped_md("record", &r.skipped));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn planned(name: &str, label: &str, args: Value) -> PlannedCall {
        PlannedCall { name: name.into(), label: label.into(), arguments: args.as_object().cloned().unwrap() }
    }

    #[test]
    fn node_f1_ignores_names_outside_the_domain_and_counts_sets() {
        let tools: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Sample 1: gold {a, b}, pred {a, c, zz}: tp a, fn b, fp c; zz is no tool: ignored.
        // Sample 2: gold {c}, pred {c, c}: tp c (a set).
        let rows = vec![(v(&["a", "b"]), v(&["a", "c", "zz"])), (v(&["c"]), v(&["c", "c"]))];
        // tp 2, fp 1, fn 1 → 4 / 6.
        assert!((micro_f1(&rows, Some(&tools)) - 4.0 / 6.0).abs() < 1e-9);
        // Without classes the hallucinated name is a false positive: 4 / 7.
        assert!((micro_f1(&rows, None) - 4.0 / 7.0).abs() < 1e-9);
        // Nothing right: 0 (not NaN).
        assert_eq!(micro_f1(&[(v(&["a"]), v(&[]))], Some(&tools)), 0.0);
    }

    #[test]
    fn links_follow_references_else_the_call_before() {
        let calls = vec![
            planned("search", "var1", json!({"q": "x"})),
            planned("book", "var2", json!({"id": "$var1.id$"})),
            planned("alarm", "var3", json!({"time": "08:00"})),
            planned("mail", "var4", json!({"a": "$var1.id$", "b": "$var2.ok$"})),
        ];
        let g = graph_of(&calls);
        assert_eq!(
            g.links,
            vec![
                ("search".into(), "book".into()),
                ("book".into(), "alarm".into()),
                ("book".into(), "mail".into()),
                ("search".into(), "mail".into())
            ]
        );
    }

    #[test]
    fn argument_f1s_compare_tool_argument_value_strings() {
        let tools: BTreeSet<String> = ["software_management", "set_alarm"].iter().map(|s| s.to_string()).collect();
        let gold = TaskGraph {
            nodes: vec![
                (
                    "software_management".into(),
                    vec![("software".into(), json!("example_software")), ("instruction".into(), json!("install"))],
                ),
                ("set_alarm".into(), vec![("time".into(), json!("08:00"))]),
            ],
            links: vec![("software_management".into(), "set_alarm".into())],
        };
        let pred = graph_of(&[
            planned(
                "software_management",
                "var1",
                json!({"software": "example_software", "instruction": "example_software"}),
            ),
            planned("set_alarm", "var2", json!({"time": "08:00"})),
        ]);
        let s = score("graph", &[gold], &[pred], &tools);
        assert_eq!((s.n_f1, s.e_f1, s.t_f1), (1.0, 1.0, 1.0));
        // Values: 2 of 3 right, 1 wrong: tp 2, fp 1, fn 1 → 4 / 6.
        assert!((s.v_f1 - 4.0 / 6.0).abs() < 1e-9, "{}", s.v_f1);
    }

    #[test]
    fn the_gold_records_at_hand_read_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gold.jsonl");
        std::fs::write(&p, "{\"id\": \"1\", \"instruction\": \"wake me at 08:00\", \"type\": \"single\", \"task_nodes\": [{\"task\": \"set_alarm\", \"arguments\": [{\"name\": \"time\", \"value\": \"08:00\"}]}], \"task_links\": []}\n{\"id\": \"2\", \"task_nodes\": []}\n").unwrap();
        let mut skipped = Vec::new();
        let got = read_gold(&p, &mut skipped).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].chain.output[0].arguments, json!({"time": "08:00"}));
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("gold.jsonl:2") && skipped[0].contains("instruction"), "{skipped:?}");
    }
}
