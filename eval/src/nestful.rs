//! NESTFUL (Basu et al., 2025, "NESTFUL: A Benchmark for Evaluating LLMs on Nested Sequences of
//! API Calls"), v1 as in `../shared/data/nestful_v1`: its three sets (executable, SGD, Glaive),
//! each with its own API specs, planned held-out by k-fold within the set (plan only, see
//! `planned`), scored with the benchmark's own metrics as its scorer computes them:
//!
//! - **F1 Func**: per sample the set of API names called, gold vs predicted; multi-label, one class
//!   per API name the gold sequences use (a predicted name no gold sequence uses is ignored, as
//!   scikit-learn's `MultiLabelBinarizer` fitted on the gold does); macro average over classes.
//! - **F1 Param**: per sample and per API name (the union of gold and predicted names; when a
//!   sequence calls a name twice, its last call counts, as the scorer's dict keeps it), the set of
//!   `arg = value` strings; classes are the gold strings; macro F1.
//! - **Partial Sequence Accuracy**: each call written `name(arg = value, …)` (arguments sorted);
//!   when the two sequences differ in length they are aligned by name (equal names pair up; at the
//!   first difference the remaining gold calls pair with nothing, then the remaining predicted
//!   ones); the share of positions where both are equal, averaged over samples.
//! - **Full Sequence Accuracy**: the share of samples whose Partial Sequence Accuracy is 1.
//! - **Win Rate** needs the calls executed: v1's executable set calls live RapidAPI endpoints and
//!   carries no recorded responses, so there is nothing to replay — not reported (`None`).
//!
//! Parser rules (what stands where the scorer parses a model's text): toolgraph's plan is already
//! structured, so nothing is parsed; the gold's final `var_result` pseudo-call (the answer's
//! composition, not an API) is left out of both sides; values are written as Python's `str()`
//! writes them (`True`, `None`, `['a', 'b']`), so `2` and `"2"` are the same value, as in the
//! scorer; references are `$varN.field$` on both sides.

use crate::chains::HarnessOptions;
use crate::planned::{plan_folds, MethodPlans, PlannedCall};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_ingest::complexfuncbench::{read_chains, read_specs, Chain, Spec};
use toolgraph_ingest::IngestError;
use toolgraph_schema::Settings;

/// The pseudo-call a gold sequence ends with.
pub const RESULT_CALL: &str = "var_result";

/// The sets of v1: (name, data file, spec file) under the benchmark's folder.
pub const SETS: &[(&str, &str, &str)] = &[
    ("executable", "executable/executable-data.json", "executable/executable-spec.json"),
    ("sgd", "non-executable/non-executable-sgd-data.json", "non-executable/non-executable-sgd-spec.json"),
    ("glaive", "non-executable/non-executable-glaive-data.json", "non-executable/non-executable-glaive-spec.json"),
];

/// A call as the metrics see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    pub arguments: Map<String, Value>,
}

impl From<&PlannedCall> for Call {
    fn from(c: &PlannedCall) -> Self {
        Call { name: c.name.clone(), arguments: c.arguments.clone() }
    }
}

/// A value as Python's `str()` writes it (the scorer formats `f'{arg} = {val}'`).
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            format!("{{{}}}", m.iter().map(|(k, v)| format!("'{k}': {}", py_repr(v))).collect::<Vec<_>>().join(", "))
        }
    }
}

/// Precision, recall and F1, macro-averaged over the classes of the gold rows (one row per
/// sample or per sample × API; each row a set of labels). Scikit-learn's `MultiLabelBinarizer`
/// fitted on the gold, then `precision/recall/f1_score(average="macro")` with 0 where undefined.
pub fn macro_prf(gold: &[Vec<String>], pred: &[Vec<String>]) -> (f64, f64, f64) {
    let classes: BTreeSet<&str> = gold.iter().flatten().map(String::as_str).collect();
    if classes.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut counts: BTreeMap<&str, (usize, usize, usize)> = classes.iter().map(|c| (*c, (0, 0, 0))).collect();
    for (g, p) in gold.iter().zip(pred) {
        let g: BTreeSet<&str> = g.iter().map(String::as_str).collect();
        let p: BTreeSet<&str> = p.iter().map(String::as_str).filter(|x| classes.contains(x)).collect();
        for c in g.union(&p) {
            let e = counts.get_mut(c).expect("a class of the gold");
            match (g.contains(c), p.contains(c)) {
                (true, true) => e.0 += 1,
                (false, true) => e.1 += 1,
                (true, false) => e.2 += 1,
                (false, false) => {}
            }
        }
    }
    let n = counts.len() as f64;
    let (mut ps, mut rs, mut fs) = (0.0, 0.0, 0.0);
    for (tp, fp, fn_) in counts.values() {
        let (tp, fp, fn_) = (*tp as f64, *fp as f64, *fn_ as f64);
        ps += if tp + fp > 0.0 { tp / (tp + fp) } else { 0.0 };
        rs += if tp + fn_ > 0.0 { tp / (tp + fn_) } else { 0.0 };
        fs += if 2.0 * tp + fp + fn_ > 0.0 { 2.0 * tp / (2.0 * tp + fp + fn_) } else { 0.0 };
    }
    (ps / n, rs / n, fs / n)
}

/// F1 Param's rows of one sample: per API name of either side, its `arg = value` strings.
pub fn param_rows(gold: &[Call], pred: &[Call]) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let map = |calls: &[Call]| -> BTreeMap<String, Vec<String>> {
        let mut m = BTreeMap::new();
        for c in calls {
            m.insert(c.name.clone(), c.arguments.iter().map(|(k, v)| format!("{k} = {}", py_str(v))).collect());
        }
        m
    };
    let (g, p) = (map(gold), map(pred));
    let names: BTreeSet<&String> = g.keys().chain(p.keys()).collect();
    names.into_iter().map(|n| (g.get(n).cloned().unwrap_or_default(), p.get(n).cloned().unwrap_or_default())).unzip()
}

/// A call as the sequence metrics write it: `name(a = 1, b = x)`, arguments sorted.
pub fn call_text(c: &Call) -> String {
    let mut args: Vec<String> = c.arguments.iter().map(|(k, v)| format!("{k} = {}", py_str(v))).collect();
    args.sort();
    format!("{}({})", c.name, args.join(", "))
}

/// Partial Sequence Accuracy of one sample (see the module).
pub fn sequence_accuracy(gold: &[Call], pred: &[Call]) -> f64 {
    let g: Vec<String> = gold.iter().map(call_text).collect();
    let p: Vec<String> = pred.iter().map(call_text).collect();
    let (g, p) = if g.len() == p.len() {
        (g, p)
    } else {
        let (gn, pn): (Vec<&str>, Vec<&str>) =
            (gold.iter().map(|c| c.name.as_str()).collect(), pred.iter().map(|c| c.name.as_str()).collect());
        let (mut i, mut j) = (0, 0);
        let (mut ag, mut ap) = (Vec::new(), Vec::new());
        while i < gn.len() || j < pn.len() {
            if i < gn.len() && j < pn.len() && gn[i] == pn[j] {
                ag.push(g[i].clone());
                ap.push(p[j].clone());
                i += 1;
                j += 1;
            } else if i < gn.len() {
                ag.push(g[i].clone());
                ap.push(String::new());
                i += 1;
            } else {
                ag.push(String::new());
                ap.push(p[j].clone());
                j += 1;
            }
        }
        (ag, ap)
    };
    if g.is_empty() {
        return 0.0;
    }
    g.iter().zip(&p).filter(|(a, b)| a == b).count() as f64 / g.len() as f64
}

/// NESTFUL's scores of one method.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NestfulScores {
    pub method: String,
    pub samples: usize,
    pub f1_func: f64,
    pub f1_param: f64,
    pub partial_sequence_accuracy: f64,
    pub full_sequence_accuracy: f64,
    /// Not computable on v1 (see the module): always `None` here.
    pub win_rate: Option<f64>,
    /// Dry runs the engine judged complete.
    pub answered: usize,
    pub recalled: usize,
    pub engine_ms_p50: f64,
}

/// Score plans against gold sequences (same order).
pub fn score(
    method: &str,
    gold: &[Vec<Call>],
    pred: &[Vec<Call>],
    answered: usize,
    recalled: usize,
    engine_ms: Vec<f64>,
) -> NestfulScores {
    let names = |calls: &[Call]| calls.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    let gf: Vec<Vec<String>> = gold.iter().map(|c| names(c)).collect();
    let pf: Vec<Vec<String>> = pred.iter().map(|c| names(c)).collect();
    let (mut gp, mut pp) = (Vec::new(), Vec::new());
    let mut acc = Vec::new();
    for (g, p) in gold.iter().zip(pred) {
        let (a, b) = param_rows(g, p);
        gp.extend(a);
        pp.extend(b);
        acc.push(sequence_accuracy(g, p));
    }
    let n = gold.len().max(1) as f64;
    NestfulScores {
        method: method.to_string(),
        samples: gold.len(),
        f1_func: macro_prf(&gf, &pf).2,
        f1_param: macro_prf(&gp, &pp).2,
        partial_sequence_accuracy: acc.iter().sum::<f64>() / n,
        full_sequence_accuracy: acc.iter().filter(|a| **a >= 1.0).count() as f64 / n,
        win_rate: None,
        answered,
        recalled,
        engine_ms_p50: crate::planned::median(engine_ms),
    }
}

/// One set read: its specs (hosts filled in so each becomes a tool) and its samples.
pub struct NestfulSet {
    pub name: String,
    pub specs: Vec<Spec>,
    pub samples: Vec<Chain>,
}

/// The gold calls of a sample (the `var_result` pseudo-call left out).
pub fn gold_calls(c: &Chain) -> Vec<Call> {
    c.output
        .iter()
        .filter(|o| o.name != RESULT_CALL)
        .map(|o| Call { name: o.name.clone(), arguments: o.arguments.as_object().cloned().unwrap_or_default() })
        .collect()
}

/// The tool an API of a set belongs to: its RapidAPI host; SGD's `Service.Api` → `Service`;
/// otherwise the set itself.
fn host_of(set: &str, spec: &Spec) -> String {
    if !spec.host.is_empty() {
        return spec.host.clone();
    }
    match spec.name.split_once('.') {
        Some((service, _)) => format!("{}.{set}.nestful", toolgraph_schema::slug(service)),
        None => format!("{set}.nestful"),
    }
}

/// Read the three sets under `root`. A sample calling an API its set's spec lacks is skipped
/// (named in `skipped`).
pub fn read_sets(root: &Path, skipped: &mut Vec<String>) -> Result<Vec<NestfulSet>, IngestError> {
    let max = 1 << 30;
    let mut out = Vec::new();
    for (name, data, spec) in SETS {
        let mut specs = read_specs(&root.join(spec), max).map_err(|e| IngestError::Input(e.to_string()))?;
        for s in &mut specs {
            s.host = host_of(name, s);
            if s.endpoint.is_empty() {
                s.endpoint = format!("/{}", toolgraph_schema::slug(&s.name));
            }
        }
        let known: BTreeSet<String> = specs.iter().map(|s| s.name.clone()).collect();
        let mut samples = Vec::new();
        for (i, mut c) in
            read_chains(&root.join(data), max).map_err(|e| IngestError::Input(e.to_string()))?.into_iter().enumerate()
        {
            c.output.retain(|o| o.name != RESULT_CALL);
            match c.output.iter().find(|o| !known.contains(&o.name)) {
                Some(o) => skipped.push(format!("{}: sample {i}: API `{}` is not in {spec}", data, o.name)),
                None if c.output.is_empty() => skipped.push(format!("{data}: sample {i}: no call")),
                None => samples.push(c),
            }
        }
        out.push(NestfulSet { name: name.to_string(), specs, samples });
    }
    Ok(out)
}

/// The published results quoted next to toolgraph's (NESTFUL paper, best 3-shot: GPT-4o).
/// A published row: (model, F1 Func, F1 Param, Partial Seq. Acc., Full Seq. Acc., Win Rate), in %.
pub type PublishedRow = (&'static str, Option<f64>, Option<f64>, Option<f64>, Option<f64>, Option<f64>);

pub const PUBLISHED: &[PublishedRow] = &[
    // (model, F1 Func, F1 Param, Partial Seq. Acc., Full Seq. Acc., Win Rate), in %
    ("GPT-4o (3-shot, best published)", None, None, None, Some(28.0), Some(60.0)),
];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NestfulReport {
    pub samples: usize,
    pub folds: usize,
    /// Over all three sets.
    pub methods: Vec<NestfulScores>,
    /// Per set: (set, scores per method).
    pub sets: Vec<(String, Vec<NestfulScores>)>,
    pub skipped: Vec<String>,
    pub seconds: f64,
    pub plans: Vec<(String, MethodPlans)>,
}

/// Over the sets, per method: gold and planned sequences, answered and recalled runs, engine ms.
type Totals = (Vec<Vec<Call>>, Vec<Vec<Call>>, usize, usize, Vec<f64>);

/// Plan every set's samples held-out with every method and score them.
pub async fn run(
    root: &Path,
    opts: &HarnessOptions,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    mut progress: impl FnMut(usize, usize),
) -> Result<NestfulReport, IngestError> {
    let started = std::time::Instant::now();
    let mut report = NestfulReport { folds: opts.folds, ..Default::default() };
    let sets = read_sets(root, &mut report.skipped)?;
    // Totals over sets: gold and predicted sequences per method.
    let mut all: Vec<Totals> = opts.methods.iter().map(|_| Default::default()).collect();
    let mut before = 0;
    let grand: usize =
        sets.iter().map(|s| crate::planned::held_out(s.samples.len(), opts)).sum::<usize>() * opts.methods.len();
    for set in &sets {
        let plans = plan_folds(&set.samples, &set.specs, "NESTFUL", opts, settings, embedder.clone(), |d, _| {
            progress(before + d, grand)
        })
        .await?;
        before += plans.iter().map(|m| m.plans.len()).sum::<usize>();
        let mut per_set = Vec::new();
        for (mi, (m, mp)) in opts.methods.iter().zip(&plans).enumerate() {
            let gold: Vec<Vec<Call>> = mp.plans.iter().map(|p| gold_calls(&set.samples[p.sample])).collect();
            let pred: Vec<Vec<Call>> = mp.plans.iter().map(|p| p.calls.iter().map(Call::from).collect()).collect();
            let answered = mp.plans.iter().filter(|p| p.status == "answered").count();
            let recalled = mp.plans.iter().filter(|p| p.recalled).count();
            let ms: Vec<f64> = mp.plans.iter().map(|p| p.engine_ms).collect();
            per_set.push(score(&m.name, &gold, &pred, answered, recalled, ms.clone()));
            let t = &mut all[mi];
            t.0.extend(gold);
            t.1.extend(pred);
            t.2 += answered;
            t.3 += recalled;
            t.4.extend(ms);
        }
        report.sets.push((set.name.clone(), per_set));
        report.plans.extend(plans.into_iter().map(|p| (set.name.clone(), p)));
    }
    report.methods =
        opts.methods.iter().zip(all).map(|(m, (g, p, a, r, ms))| score(&m.name, &g, &p, a, r, ms)).collect();
    report.samples = report.methods.first().map(|m| m.samples).unwrap_or(0);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into())
}

/// The report as markdown: NESTFUL's table with toolgraph's rows next to the published one.
pub fn markdown(r: &NestfulReport) -> String {
    let mut s = format!(
        "## NESTFUL v1 ({} samples: executable, SGD, Glaive; {}-fold within each set, plan only)\n\n| model | F1 Func | F1 Param | Partial Sequence Accuracy | Full Sequence Accuracy | Win Rate |\n|---|---:|---:|---:|---:|---:|\n",
        r.samples, r.folds
    );
    for (m, f, p, ps, fs, w) in PUBLISHED {
        s.push_str(&format!("| {m} | {} | {} | {} | {} | {} |\n", pct(*f), pct(*p), pct(*ps), pct(*fs), pct(*w)));
    }
    for m in &r.methods {
        s.push_str(&format!(
            "| **toolgraph `{}`** | **{:.2}** | **{:.2}** | **{:.2}** | **{:.2}** | {} |\n",
            m.method,
            100.0 * m.f1_func,
            100.0 * m.f1_param,
            100.0 * m.partial_sequence_accuracy,
            100.0 * m.full_sequence_accuracy,
            m.win_rate.map(|w| format!("{:.2}", 100.0 * w)).unwrap_or_else(|| "n/a (no recorded responses)".into())
        ));
    }
    s.push_str("\nPer set (toolgraph; Full Sequence Accuracy, %):\n\n| method |");
    for (name, _) in &r.sets {
        s.push_str(&format!(" {name} |"));
    }
    s.push_str("\n|---|");
    for _ in &r.sets {
        s.push_str("---:|");
    }
    s.push('\n');
    for (mi, m) in r.methods.iter().enumerate() {
        s.push_str(&format!("| {} |", m.method));
        for (_, scores) in &r.sets {
            s.push_str(&format!(
                " {:.2} ({} samples) |",
                100.0 * scores.get(mi).map(|x| x.full_sequence_accuracy).unwrap_or(0.0),
                scores.get(mi).map(|x| x.samples).unwrap_or(0)
            ));
        }
        s.push('\n');
    }
    s.push_str(&crate::report::skipped_md("sample", &r.skipped));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> Call {
        Call { name: name.into(), arguments: args.as_object().cloned().unwrap() }
    }

    #[test]
    fn values_are_written_as_python_writes_them() {
        assert_eq!(py_str(&json!("London")), "London");
        assert_eq!(py_str(&json!(2)), "2");
        assert_eq!(py_str(&json!(2.5)), "2.5");
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!(["New York", 3])), "['New York', 3]");
        // The scorer's str(): a number and its text are the same value.
        assert_eq!(
            call_text(&call("f", json!({"n": 2, "a": "x"}))),
            call_text(&call("f", json!({"a": "x", "n": "2"})))
        );
        assert_eq!(call_text(&call("f", json!({"b": "$var1.id$", "a": 1}))), "f(a = 1, b = $var1.id$)");
    }

    #[test]
    fn f1_func_is_macro_over_the_gold_names() {
        // Sample 1: gold {A, B}, pred {A, C}; sample 2: gold {B}, pred {B}.
        // Class A: tp 1 → F1 1. Class B: tp 1, fn 1 → 2/3. C is no gold class: ignored.
        let gold = vec![vec!["A".to_string(), "B".to_string()], vec!["B".to_string()]];
        let pred = vec![vec!["A".to_string(), "C".to_string()], vec!["B".to_string()]];
        let (p, r, f) = macro_prf(&gold, &pred);
        assert!((f - (1.0 + 2.0 / 3.0) / 2.0).abs() < 1e-9, "{f}");
        assert!((p - 1.0).abs() < 1e-9, "{p}");
        assert!((r - 0.75).abs() < 1e-9, "{r}");
        // Duplicates count once (a multi-label row is a set); nothing predicted: 0.
        let (_, _, f) = macro_prf(&[vec!["A".into(), "A".into()]], &[vec![]]);
        assert_eq!(f, 0.0);
        assert_eq!(macro_prf(&[vec!["A".into(), "A".into()]], &[vec!["A".into()]]).2, 1.0);
    }

    #[test]
    fn f1_param_rows_are_per_api_and_the_last_call_of_a_name_counts() {
        let gold = vec![
            call("Search", json!({"q": "New York"})),
            call("Search", json!({"q": "London"})),
            call("Flights", json!({"from": "$var1.skyId$", "to": "$var2.skyId$"})),
        ];
        let pred = vec![call("Search", json!({"q": "London"})), call("Hotels", json!({"city": "London"}))];
        let (g, p) = param_rows(&gold, &pred);
        // Rows: Flights, Hotels, Search (sorted names of either side).
        assert_eq!(
            g,
            vec![
                vec!["from = $var1.skyId$".to_string(), "to = $var2.skyId$".to_string()],
                vec![],
                vec!["q = London".to_string()]
            ]
        );
        assert_eq!(p, vec![vec![], vec!["city = London".to_string()], vec!["q = London".to_string()]]);
        // Classes: from=…, to=…, q=London. q: tp 1 → 1; from, to: fn → 0. Macro: 1/3.
        assert!((macro_prf(&g, &p).2 - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn sequence_accuracy_aligns_by_name_when_lengths_differ() {
        let a = call("A", json!({"x": 1}));
        let b = call("B", json!({"y": "$var1.id$"}));
        let c = call("C", json!({}));
        // Same length: position by position.
        assert_eq!(sequence_accuracy(&[a.clone(), b.clone()], &[a.clone(), b.clone()]), 1.0);
        assert_eq!(sequence_accuracy(&[a.clone(), b.clone()], &[b.clone(), a.clone()]), 0.0);
        // Predicted one call short: A pairs with A, then B pairs with nothing: 1/2.
        assert_eq!(sequence_accuracy(&[a.clone(), b.clone()], std::slice::from_ref(&a)), 0.5);
        // One extra call first: at the first difference every remaining gold call pairs with
        // nothing, then the predicted ones: [A,B,"",""] vs ["","",C,A]... 0 of 4.
        assert_eq!(sequence_accuracy(&[a.clone(), b.clone()], &[c.clone(), a.clone(), b.clone()]), 0.0);
        // One extra call last: A, B pair; C pairs with nothing: 2/3.
        assert!((sequence_accuracy(&[a.clone(), b.clone()], &[a.clone(), b.clone(), c]) - 2.0 / 3.0).abs() < 1e-9);
        // Nothing planned.
        assert_eq!(sequence_accuracy(std::slice::from_ref(&a), &[]), 0.0);
        // A wrong argument value is a wrong call.
        assert_eq!(sequence_accuracy(&[a], &[call("A", json!({"x": 2}))]), 0.0);
    }

    #[test]
    fn scores_over_samples() {
        let a = call("A", json!({"x": 1}));
        let b = call("B", json!({"y": "$var1.id$"}));
        let gold = vec![vec![a.clone(), b.clone()], vec![a.clone()]];
        let pred = vec![vec![a.clone(), b.clone()], vec![]];
        let s = score("graph", &gold, &pred, 1, 0, vec![1.0, 3.0]);
        assert_eq!((s.partial_sequence_accuracy, s.full_sequence_accuracy), (0.5, 0.5));
        assert_eq!(s.win_rate, None);
        // F1 Func: A: tp 1, fn 1 → 2/3; B: tp 1 → 1.
        assert!((s.f1_func - (2.0 / 3.0 + 1.0) / 2.0).abs() < 1e-9);
    }
}
