//! `toolgraph eval score`: anyone's predictions scored by ComplexFuncBench's protocol (the
//! [`crate::complexfuncbench`] module, the same code that scores toolgraph's own runs).
//!
//! A predictions file is JSON lines, one request each:
//! `{"request": "...", "calls": [{"name": "Search_Car_Location", "arguments": {...}}, ...]}` —
//! literal values, as a model that saw the responses would send them, each call a turn of its
//! own; or `"turns": [[call, call], [call]]` for a model that makes calls together. Each line is
//! matched to the chain whose request it repeats (surrounding space ignored), its calls are
//! answered in order by the replay sandbox's lookup over the chains' recordings (what the report
//! shows for each: `exact`, `nearest` or `none`), and the sample is scored. A line that cannot be
//! read, or names no chain of the data, is skipped with its line number and the rest goes on.
//! A line may also be a toolgraph run as `ask --json` prints it or `/v1/orchestrate` answers it
//! (it has a `trace`): its calls are those the run sent.

use crate::chains::{gold_of, recordings};
use crate::complexfuncbench::{api_key, score_turns, Protocol, SampleScore, SentCall};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use toolgraph_ingest::complexfuncbench::{Chain, Spec};
use toolgraph_sandbox::Match;

/// The longest line read from a predictions file (a request and its calls), bytes.
pub const MAX_LINE: usize = 4 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PredictionLine {
    request: String,
    #[serde(default)]
    calls: Option<Vec<PredictedCall>>,
    #[serde(default)]
    turns: Option<Vec<Vec<PredictedCall>>>,
}

#[derive(Debug, Deserialize)]
struct PredictedCall {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

/// One request scored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoredRequest {
    /// Line of the predictions file.
    pub line: usize,
    pub request: String,
    pub success: bool,
    pub correct_calls: usize,
    pub gold_calls: usize,
    /// What ended the sample, or why it is no success.
    pub first_error: Option<String>,
    /// How the sandbox answered each predicted call, in order: `exact` (recorded for exactly
    /// these arguments), `nearest` (another recording of the API: never makes a call right) or
    /// `none`.
    pub answers: Vec<String>,
}

/// A toolgraph run as `ask --json` prints it and the daemon answers it: its request and trace,
/// the rest ignored.
#[derive(Debug, Deserialize)]
struct RunLine {
    request: String,
    trace: Vec<toolgraph_engine::run::TraceEvent>,
}

/// A predictions line: calls or turns as documented, or a toolgraph run (it has a `trace`), whose
/// calls are those it sent, in order, with their arguments as they went out — the evaluation's
/// own reading of a run ([`crate::complexfuncbench::sent_calls`]).
fn prediction_of(text: &str) -> Result<PredictionLine, serde_json::Error> {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        trace: Option<serde::de::IgnoredAny>,
    }
    if serde_json::from_str::<Probe>(text).is_ok_and(|p| p.trace.is_some()) {
        let run: RunLine = serde_json::from_str(text)?;
        let calls = crate::complexfuncbench::sent_calls(&run.trace)
            .into_iter()
            .map(|c| PredictedCall { name: c.api, arguments: c.arguments })
            .collect();
        return Ok(PredictionLine { request: run.request, calls: Some(calls), turns: None });
    }
    serde_json::from_str(text)
}

/// The report of `toolgraph eval score`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoreReport {
    /// Requests scored (lines read and matched to a chain).
    pub scored: usize,
    /// Chains of the data with no prediction (not part of the figures).
    pub chains_without_prediction: usize,
    /// Lines skipped, each with its line number and why.
    pub skipped: Vec<String>,
    /// The paper's Overall Success Rate over the requests scored, in %.
    pub overall_success: f64,
    /// The paper's Overall Call Acc. over the requests scored, in %.
    pub overall_call_acc: f64,
    pub requests: Vec<ScoredRequest>,
}

fn key(request: &str) -> String {
    request.trim().to_string()
}

/// Score the predictions read from `lines` against `chains` (recordings and gold) and `specs`.
pub fn score_predictions(chains: &[Chain], specs: &[Spec], lines: impl BufRead) -> std::io::Result<ScoreReport> {
    let (recs, errors) = recordings(chains, specs);
    let protocol = Protocol::new(specs, &recs);
    let mut report =
        ScoreReport { skipped: errors.into_iter().map(|e| format!("data: {e}")).collect(), ..Default::default() };
    let by_request: HashMap<String, &Chain> = chains.iter().rev().map(|c| (key(&c.input), c)).collect();
    let mut predicted: std::collections::HashSet<String> = Default::default();
    let (mut successes, mut correct, mut golden) = (0usize, 0usize, 0usize);
    for (i, line) in read_lines(lines).enumerate() {
        let n = i + 1;
        let text = match line {
            Ok(t) => t,
            Err(e) => {
                report.skipped.push(format!("line {n}: {e}"));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let p: PredictionLine = match prediction_of(&text) {
            Ok(p) => p,
            Err(e) => {
                report.skipped.push(format!("line {n}: not a prediction ({e}): expected {{\"request\": \"...\", \"calls\": [{{\"name\": \"...\", \"arguments\": {{...}}}}]}}"));
                continue;
            }
        };
        let turns: Vec<Vec<PredictedCall>> = match (p.calls, p.turns) {
            (Some(calls), None) => calls.into_iter().map(|c| vec![c]).collect(),
            (None, Some(turns)) => turns,
            (None, None) => Vec::new(),
            (Some(_), Some(_)) => {
                report.skipped.push(format!("line {n}: give `calls` or `turns`, not both"));
                continue;
            }
        };
        let Some(chain) = by_request.get(&key(&p.request)) else {
            report.skipped.push(format!(
                "line {n}: the request `{}` is not a request of the data",
                p.request.chars().take(80).collect::<String>()
            ));
            continue;
        };
        if !predicted.insert(key(&p.request)) {
            report
                .skipped
                .push(format!("line {n}: the request was predicted on an earlier line (the first is scored)"));
            continue;
        }
        let gold = match gold_of(chain) {
            Ok(g) => g,
            Err(e) => {
                report.skipped.push(format!("line {n}: its chain cannot be read: {e}"));
                continue;
            }
        };
        // Executed in order against the sandbox's recordings.
        let mut answers = Vec::new();
        let sent: Vec<Vec<SentCall>> = turns
            .into_iter()
            .map(|turn| {
                turn.into_iter()
                    .map(|c| {
                        let api = api_key(&c.name);
                        let answer = protocol.sandbox_answer(&api, &c.arguments);
                        answers.push(
                            match &answer {
                                Some((_, Match::Exact)) => "exact",
                                Some((_, Match::Nearest)) => "nearest",
                                None => "none",
                            }
                            .to_string(),
                        );
                        SentCall { api, arguments: c.arguments, response: answer.map(|(r, _)| r.as_ref().clone()) }
                    })
                    .collect()
            })
            .collect();
        let SampleScore { golden: g, correct: c, success, first_error } = score_turns(&protocol, &gold, &sent);
        successes += usize::from(success);
        correct += c;
        golden += g;
        report.requests.push(ScoredRequest {
            line: n,
            request: gold.request.clone(),
            success,
            correct_calls: c,
            gold_calls: g,
            first_error,
            answers,
        });
    }
    report.scored = report.requests.len();
    report.chains_without_prediction = by_request.keys().filter(|k| !predicted.contains(*k)).count();
    report.overall_success = if report.scored == 0 { 0.0 } else { 100.0 * successes as f64 / report.scored as f64 };
    report.overall_call_acc = if golden == 0 { 0.0 } else { 100.0 * correct as f64 / golden as f64 };
    Ok(report)
}

/// Lines of at most [`MAX_LINE`] bytes (a longer one is an error for that line, and skipped).
fn read_lines(mut r: impl BufRead) -> impl Iterator<Item = Result<String, String>> {
    std::iter::from_fn(move || {
        let mut buf = Vec::new();
        let mut too_long = false;
        loop {
            let chunk = match r.fill_buf() {
                Ok(c) => c,
                Err(e) => return Some(Err(format!("cannot be read: {e}"))),
            };
            if chunk.is_empty() {
                return if buf.is_empty() && !too_long { None } else { Some(finish(buf, too_long)) };
            }
            let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if buf.len() + take <= MAX_LINE + 1 {
                buf.extend_from_slice(&chunk[..take]);
            } else {
                too_long = true;
                buf.clear();
            }
            r.consume(take);
            if done {
                return Some(finish(buf, too_long));
            }
        }
    })
}

fn finish(buf: Vec<u8>, too_long: bool) -> Result<String, String> {
    if too_long {
        return Err(format!("longer than {MAX_LINE} bytes"));
    }
    String::from_utf8(buf).map(|s| s.trim_end_matches(['\n', '\r']).to_string()).map_err(|_| "not UTF-8".to_string())
}

/// Score a predictions file against the chains and specs files.
pub fn score_file(chains: &[Chain], specs: &[Spec], predictions: &Path) -> std::io::Result<ScoreReport> {
    let f = std::fs::File::open(predictions)?;
    score_predictions(chains, specs, std::io::BufReader::new(f))
}

/// The report as a short markdown summary.
pub fn markdown(r: &ScoreReport) -> String {
    let mut s = format!(
        "ComplexFuncBench's protocol (without its LLM judge: a lower bound of the official figures) on {} requests:\n\n| Overall Success Rate | Overall Call Acc. | requests scored | lines skipped | chains without a prediction |\n|---:|---:|---:|---:|---:|\n| {:.2} | {:.2} | {} | {} | {} |\n",
        r.scored,
        r.overall_success,
        r.overall_call_acc,
        r.scored,
        r.skipped.len(),
        r.chains_without_prediction
    );
    for e in r.skipped.iter().take(10) {
        s.push_str(&format!("\n- skipped: {e}"));
    }
    if r.skipped.len() > 10 {
        s.push_str(&format!("\n- … and {} more (in the JSON report)", r.skipped.len() - 10));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data() -> (Vec<Chain>, Vec<Spec>) {
        let chains: Vec<Chain> = serde_json::from_value(json!([
            {"input": " Find the car rentals at LAX. ", "output": [
                {"name": "Search_Car_Location", "arguments": {"query": "LAX"}, "label": "var1", "response": [{"coordinates": {"latitude": 33.94, "longitude": -118.4}}]},
                {"name": "Search_Car_Rentals", "arguments": {"pick_up_latitude": "$var1.coordinates.latitude$", "pick_up_longitude": "$var1.coordinates.longitude$", "pick_up_date": "2024-10-14"}, "label": "var2", "response": {"cars": [1]}}
            ]}
        ]))
        .unwrap();
        let specs: Vec<Spec> = serde_json::from_value(json!([
            {"name": "Search_Car_Location", "host": "h.example", "endpoint": "/loc", "query_parameters": {"query": {"type": "string", "required": true}}},
            {"name": "Search_Car_Rentals", "host": "h.example", "endpoint": "/cars", "query_parameters": {"pick_up_latitude": {"type": "number", "required": true}, "pick_up_longitude": {"type": "number", "required": true}, "pick_up_date": {"type": "string", "required": true}, "driver_age": {"type": "number", "required": false}}}
        ]))
        .unwrap();
        (chains, specs)
    }

    #[test]
    fn predictions_are_matched_to_requests_executed_and_scored_and_bad_lines_are_skipped_by_number() {
        let (chains, specs) = data();
        let right = json!({"request": "Find the car rentals at LAX.", "calls": [
            {"name": "Search_Car_Location", "arguments": {"query": "LAX"}},
            {"name": "Search_Car_Rentals", "arguments": {"pick_up_latitude": 33.94, "pick_up_longitude": -118.4, "pick_up_date": "2024-10-14"}}
        ]});
        let text = format!("{right}\nnot json\n{}\n\n", json!({"request": "unknown", "calls": []}));
        let r = score_predictions(&chains, &specs, text.as_bytes()).unwrap();
        assert_eq!((r.scored, r.overall_success, r.overall_call_acc), (1, 100.0, 100.0), "{r:?}");
        assert_eq!(r.requests[0].answers, vec!["exact", "exact"]);
        assert_eq!(r.skipped.len(), 2, "{:?}", r.skipped);
        assert!(r.skipped[0].starts_with("line 2: not a prediction"), "{:?}", r.skipped);
        assert!(r.skipped[1].starts_with("line 3: the request `unknown`"), "{:?}", r.skipped);
        // An optional argument the gold did not send: the sandbox answers from the nearest
        // recording, which scores nothing.
        let extra = json!({"request": "Find the car rentals at LAX.", "calls": [
            {"name": "Search_Car_Location", "arguments": {"query": "LAX"}},
            {"name": "Search_Car_Rentals", "arguments": {"pick_up_latitude": 33.94, "pick_up_longitude": -118.4, "pick_up_date": "2024-10-14", "driver_age": 40}}
        ]});
        let r = score_predictions(&chains, &specs, extra.to_string().as_bytes()).unwrap();
        assert_eq!(r.requests[0].answers, vec!["exact", "nearest"]);
        assert_eq!((r.requests[0].success, r.requests[0].correct_calls, r.overall_call_acc), (false, 1, 50.0), "{r:?}");
    }

    /// A toolgraph run as `ask --json` prints it (other fields ignored) is scored by the calls its
    /// trace sent, references resolved against the responses it got.
    #[test]
    fn a_toolgraph_run_is_scored_by_what_it_sent() {
        let (chains, specs) = data();
        let run = json!({"status": "answered", "request": "Find the car rentals at LAX.", "answer": "…", "trace": [
            {"type": "call", "label": "var1", "api": "travel/h/search_car_location", "arguments": {"query": "LAX"}},
            {"type": "response", "label": "var1", "api": "travel/h/search_car_location", "status": 200, "attempts": 1, "elapsed_ms": 1.0,
             "observation": "", "response": [{"coordinates": {"latitude": 33.94, "longitude": -118.4}}]},
            {"type": "call", "label": "var2", "api": "travel/h/search_car_rentals",
             "arguments": {"pick_up_latitude": "$var1.0.coordinates.latitude$", "pick_up_longitude": "$var1.0.coordinates.longitude$", "pick_up_date": "2024-10-14"}},
            {"type": "finish", "answer": "…"}
        ]});
        let r = score_predictions(&chains, &specs, run.to_string().as_bytes()).unwrap();
        assert_eq!((r.scored, r.overall_success, r.overall_call_acc), (1, 100.0, 100.0), "{r:?}");
        let wrong_day = run.to_string().replace("2024-10-14", "2024-10-15");
        let r = score_predictions(&chains, &specs, wrong_day.as_bytes()).unwrap();
        assert_eq!((r.requests[0].success, r.requests[0].correct_calls), (false, 1), "{r:?}");
    }

    #[test]
    fn an_over_long_line_is_skipped_and_the_next_one_read() {
        let mut text = "x".repeat(MAX_LINE + 10);
        text.push('\n');
        text.push_str("{\"request\": \"nope\"}\n");
        let lines: Vec<_> = read_lines(text.as_bytes()).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].as_ref().unwrap_err().starts_with("longer than"));
        assert_eq!(lines[1].as_deref(), Ok("{\"request\": \"nope\"}"));
    }
}
