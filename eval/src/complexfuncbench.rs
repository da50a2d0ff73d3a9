//! ComplexFuncBench's own metrics (Zhong et al., 2025, "ComplexFuncBench: Exploring Multi-Step and
//! Constrained Function Calling under Long-Context Scenario"): **Overall Success Rate** and
//! **Overall Call Acc.**, computed on a run's trace the way the paper scores a model's turns.
//!
//! The paper walks a sample step by step: each call the model makes is compared with the golden
//! calls by *multi-dimensional matching* — rule-based (same function, same arguments), then
//! response-based (the call returned exactly a golden call's response), then an LLM judge (GPT-4o:
//! equivalent arguments) — a correct call gets the golden response, and **the first incorrect call
//! ends the sample**; the golden calls not reached count as incorrect. Call Acc. = correct calls /
//! golden calls over all samples; a sample succeeds when all its calls are correct and the final
//! answer is complete (judged by GPT-4o).
//!
//! Here, on toolgraph's runs (every call it sends, in order, from the trace):
//! - rule-based: same API, and every golden argument sent with an equal value (values normalized
//!   as the replay sandbox compares them: `"5"` = `5`, case and surrounding space of strings);
//!   extra arguments the API takes with defaults are not an error;
//! - response-based: same API and a response equal to a not-yet-matched golden call's response;
//! - **no LLM judge**: an equivalent-but-different argument counts as incorrect (stricter than the
//!   paper);
//! - completeness of the final answer: the engine's own honest status (`answered`, the coverage
//!   judge) instead of GPT-4o's 0–2 completeness score.
//!
//! Each golden call matches at most once; a repeated call is incorrect, as in the paper.

use crate::chains::Gold;
use serde_json::{Map, Value};
use std::collections::HashMap;
use toolgraph_engine::exec::refs;
use toolgraph_engine::run::trace::TraceEvent;
use toolgraph_sandbox::normalize;

/// One call a run sent: the API's name (slug), the arguments as sent, and its response when it
/// succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct SentCall {
    pub api: String,
    pub arguments: Map<String, Value>,
    pub response: Option<Value>,
}

/// One sample scored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleScore {
    pub golden: usize,
    /// Correct calls before the first incorrect one.
    pub correct: usize,
    pub success: bool,
    /// The first incorrect call (what ended the sample), if any.
    pub first_error: Option<String>,
}

/// The API part of an id (`travel/booking_com15/search_car_location` → `search_car_location`) or
/// a golden name's slug (`Search_Car_Location` → `search_car_location`).
fn api_key(name: &str) -> String {
    toolgraph_schema::slug(name.rsplit('/').next().unwrap_or(name))
}

/// Every call the run sent, in order, with arguments resolved as they went out.
pub fn sent_calls(trace: &[TraceEvent]) -> Vec<SentCall> {
    let mut outputs: HashMap<String, Value> = HashMap::new();
    let mut out: Vec<SentCall> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    for t in trace {
        match t {
            TraceEvent::Call { label, api, arguments, .. } => {
                let arguments = refs::resolve(arguments, &outputs).unwrap_or_else(|_| arguments.clone());
                open.insert(label.clone(), out.len());
                out.push(SentCall { api: api_key(api), arguments, response: None });
            }
            TraceEvent::Response { label, status, response, .. } if (200..300).contains(status) => {
                if let Some(&i) = open.get(label) {
                    out[i].response = Some(response.as_ref().clone());
                }
                outputs.insert(label.clone(), response.as_ref().clone());
            }
            _ => {}
        }
    }
    out
}

fn rule_match(gold: &Map<String, Value>, sent: &Map<String, Value>) -> bool {
    gold.iter().all(|(k, v)| sent.get(k).is_some_and(|s| normalize(s) == normalize(v)))
}

/// Score one sample: `gold` the golden calls (name, resolved arguments, response), `sent` what the
/// run sent, `answered` whether the run ended with a complete answer.
pub fn score(gold: &Gold, sent: &[SentCall], answered: bool) -> SampleScore {
    let keys: Vec<String> = gold.calls.iter().map(|g| api_key(&g.name)).collect();
    let mut matched = vec![false; gold.calls.len()];
    let mut correct = 0;
    let mut first_error = None;
    for (n, call) in sent.iter().enumerate() {
        let by_rule = (0..gold.calls.len()).find(|&i| !matched[i] && keys[i] == call.api && rule_match(&gold.calls[i].resolved, &call.arguments));
        let by_response = || {
            let r = call.response.as_ref()?;
            (0..gold.calls.len()).find(|&i| !matched[i] && keys[i] == call.api && gold.calls[i].response.as_ref().is_some_and(|g| normalize(g) == normalize(r)))
        };
        match by_rule.or_else(by_response) {
            Some(i) => {
                matched[i] = true;
                correct += 1;
            }
            None => {
                first_error = Some(format!("call {} ({}) matches no remaining golden call{}", n + 1, call.api, nearest_difference(gold, &keys, &matched, call)));
                break;
            }
        }
    }
    let golden = gold.calls.len();
    let success = first_error.is_none() && correct == golden && golden > 0 && answered;
    SampleScore { golden, correct, success, first_error }
}

/// Why a call matched no golden call, against the remaining golden call of its API that differs
/// least: `: drop_off_time "11:00" (gold "17:00")`, or that no golden call of the API remains.
fn nearest_difference(gold: &Gold, keys: &[String], matched: &[bool], call: &SentCall) -> String {
    let diffs = |g: &Map<String, Value>| -> Vec<String> {
        g.iter()
            .filter(|(k, v)| call.arguments.get(*k).is_none_or(|s| normalize(s) != normalize(v)))
            .map(|(k, v)| match call.arguments.get(k) {
                Some(s) => format!("{k} {} (gold {})", short(s), short(v)),
                None => format!("{k} missing (gold {})", short(v)),
            })
            .collect()
    };
    let nearest = (0..gold.calls.len()).filter(|&i| !matched[i] && keys[i] == call.api).map(|i| diffs(&gold.calls[i].resolved)).min_by_key(Vec::len);
    match nearest {
        Some(d) => format!(": {}", d.join(", ")),
        None => ": no golden call of this API remains".to_string(),
    }
}

fn short(v: &Value) -> String {
    let t = v.to_string();
    if t.chars().count() > 60 {
        format!("{}…", t.chars().take(60).collect::<String>())
    } else {
        t
    }
}

/// Gold calls some sent call matches (by rule, else by response), each gold call and each sent
/// call at most once, in any order and without stopping at a wrong call.
pub fn correct_calls(gold: &Gold, sent: &[SentCall]) -> usize {
    let keys: Vec<String> = gold.calls.iter().map(|g| api_key(&g.name)).collect();
    let mut matched = vec![false; gold.calls.len()];
    // Rule matches first (an exact call is the stronger claim), then responses.
    let mut used = vec![false; sent.len()];
    for (n, call) in sent.iter().enumerate() {
        if let Some(i) = (0..gold.calls.len()).find(|&i| !matched[i] && keys[i] == call.api && rule_match(&gold.calls[i].resolved, &call.arguments)) {
            matched[i] = true;
            used[n] = true;
        }
    }
    for (n, call) in sent.iter().enumerate() {
        let Some(r) = call.response.as_ref().filter(|_| !used[n]) else { continue };
        if let Some(i) = (0..gold.calls.len()).find(|&i| !matched[i] && keys[i] == call.api && gold.calls[i].response.as_ref().is_some_and(|g| normalize(g) == normalize(r))) {
            matched[i] = true;
            used[n] = true;
        }
    }
    matched.iter().filter(|m| **m).count()
}

/// The paper's published results (Table 3: Overall Success Rate, Overall Call Acc., in %).
pub const PUBLISHED: &[(&str, f64, f64)] = &[
    ("Claude-3.5-Sonnet", 61.00, 79.27),
    ("GPT-4o", 60.50, 80.55),
    ("GPT-4-Turbo", 49.50, 71.38),
    ("Qwen2.5-72B", 40.10, 58.32),
    ("Mistral Large 2", 20.10, 48.78),
    ("Qwen2.5-7B", 5.00, 18.19),
    ("Llama-3.1-70B", 2.70, 8.17),
];

/// The paper's table with toolgraph's rows among the published ones (best first).
pub fn table(r: &crate::chains::ChainReport) -> String {
    let mut rows: Vec<(String, f64, f64, bool)> = PUBLISHED.iter().map(|(m, s, c)| (m.to_string(), *s, *c, false)).collect();
    for m in &r.methods {
        rows.push((format!("**toolgraph `{}`**", m.method), 100.0 * m.overall_success_rate, 100.0 * m.overall_call_acc, true));
    }
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
    let mut s = format!(
        "\nComplexFuncBench's metrics ({} held-out chains per method; its protocol without the LLM judge: see the `complexfuncbench` module; published rows from the paper's Table 3):\n\n| model | Overall Success Rate | Overall Call Acc. |\n|---|---:|---:|\n",
        r.methods.first().map(|m| m.chains).unwrap_or(0)
    );
    for (m, sr, ca, ours) in rows {
        let (sr, ca) = if ours { (format!("**{sr:.2}**"), format!("**{ca:.2}**")) } else { (format!("{sr:.2}"), format!("{ca:.2}")) };
        s.push_str(&format!("| {m} | {sr} | {ca} |\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chains::GoldCall;
    use serde_json::json;
    use std::sync::Arc;

    fn gold(calls: Value) -> Gold {
        let calls = calls
            .as_array()
            .unwrap()
            .iter()
            .map(|c| GoldCall { name: c["name"].as_str().unwrap().into(), arguments: c["args"].as_object().unwrap().clone(), resolved: c["args"].as_object().unwrap().clone(), response: c.get("response").cloned() })
            .collect();
        Gold { request: "r".into(), calls }
    }

    fn sent(api: &str, args: Value, response: Option<Value>) -> SentCall {
        SentCall { api: api.into(), arguments: args.as_object().unwrap().clone(), response }
    }

    /// Two golden calls: a location search, then a rental search that uses its coordinates.
    fn car_gold() -> Gold {
        gold(json!([
            {"name": "Search_Car_Location", "args": {"query": "San Diego Marriott La Jolla"}, "response": [{"city": "San Diego"}]},
            {"name": "Search_Car_Rentals", "args": {"pick_up_latitude": 32.873055, "pick_up_longitude": -117.215935, "pick_up_date": "2024-10-14"}, "response": {"data": 1}},
        ]))
    }

    #[test]
    fn all_calls_right_and_answered_is_a_success() {
        let s = score(&car_gold(), &[
            sent("search_car_location", json!({"query": "San Diego Marriott La Jolla"}), Some(json!([{"city": "San Diego"}]))),
            // Numbers sent as strings and an extra defaulted argument still match (rule-based).
            sent("search_car_rentals", json!({"pick_up_latitude": "32.873055", "pick_up_longitude": -117.215935, "pick_up_date": "2024-10-14", "currency_code": "USD"}), Some(json!({"data": 1}))),
        ], true);
        assert_eq!(s, SampleScore { golden: 2, correct: 2, success: true, first_error: None });
        // The same calls without a complete answer: every call correct, no success.
        let s = score(&car_gold(), &[sent("search_car_location", json!({"query": "San Diego Marriott La Jolla"}), None), sent("search_car_rentals", json!({"pick_up_latitude": 32.873055, "pick_up_longitude": -117.215935, "pick_up_date": "2024-10-14"}), None)], false);
        assert_eq!((s.correct, s.success), (2, false));
    }

    #[test]
    fn the_first_wrong_call_ends_the_sample() {
        let s = score(&car_gold(), &[
            sent("search_car_location", json!({"query": "San Diego Marriott La Jolla"}), Some(json!([{"city": "San Diego"}]))),
            sent("search_car_rentals", json!({"pick_up_latitude": 32.87, "pick_up_longitude": -117.215935, "pick_up_date": "2024-10-14"}), None),
            // A right call after the wrong one does not count (the paper stops at the error).
            sent("search_car_rentals", json!({"pick_up_latitude": 32.873055, "pick_up_longitude": -117.215935, "pick_up_date": "2024-10-14"}), Some(json!({"data": 1}))),
        ], true);
        assert_eq!((s.golden, s.correct, s.success), (2, 1, false));
        assert!(s.first_error.unwrap().starts_with("call 2 (search_car_rentals)"));
        // A wrong first call: nothing is correct.
        let s = score(&car_gold(), &[sent("search_hotels", json!({"dest_id": "1"}), None)], true);
        assert_eq!((s.correct, s.success), (0, false));
    }

    #[test]
    fn a_different_argument_with_the_golden_response_is_correct() {
        // Response-based matching: another spelling that returned exactly the golden response.
        let s = score(&car_gold(), &[
            sent("search_car_location", json!({"query": "Marriott La Jolla, San Diego"}), Some(json!([{"city": "San Diego"}]))),
            sent("search_car_rentals", json!({"pick_up_latitude": 32.873055, "pick_up_longitude": -117.215935, "pick_up_date": "2024-10-14"}), Some(json!({"data": 1}))),
        ], true);
        assert_eq!((s.correct, s.success), (2, true));
        // A different argument and a different response: incorrect (no LLM judge here).
        let s = score(&car_gold(), &[sent("search_car_location", json!({"query": "Marriott La Jolla, San Diego"}), Some(json!([{"city": "La Jolla"}])))], true);
        assert_eq!(s.correct, 0);
    }

    #[test]
    fn parallel_golden_calls_match_in_any_order_but_only_once() {
        // The paper's example: two rentals (two pick-up dates) after one location search.
        let g = gold(json!([
            {"name": "Search_Car_Location", "args": {"query": "X"}},
            {"name": "Search_Car_Rentals", "args": {"pick_up_date": "2024-10-14"}},
            {"name": "Search_Car_Rentals", "args": {"pick_up_date": "2024-10-15"}},
        ]));
        let loc = sent("search_car_location", json!({"query": "x "}), None);
        let d15 = sent("search_car_rentals", json!({"pick_up_date": "2024-10-15"}), None);
        let d14 = sent("search_car_rentals", json!({"pick_up_date": "2024-10-14"}), None);
        let s = score(&g, &[loc.clone(), d15.clone(), d14], true);
        assert_eq!((s.correct, s.success), (3, true));
        // The same rental twice: the repeat matches no remaining golden call.
        let s = score(&g, &[loc, d15.clone(), d15], true);
        assert_eq!((s.correct, s.success), (2, false));
        assert!(s.first_error.unwrap().starts_with("call 3"));
    }

    #[test]
    fn call_correctness_counts_every_matched_gold_call_without_stopping() {
        // API-Bank's correctness: a wrong call in between does not end the count; a repeat
        // matches nothing; a different argument with the golden response counts.
        let g = car_gold();
        let wrong = sent("search_hotels", json!({"dest_id": "1"}), None);
        let loc = sent("search_car_location", json!({"query": "Marriott La Jolla, San Diego"}), Some(json!([{"city": "San Diego"}])));
        let rent = sent("search_car_rentals", json!({"pick_up_latitude": 32.873055, "pick_up_longitude": -117.215935, "pick_up_date": "2024-10-14"}), None);
        assert_eq!(correct_calls(&g, &[wrong.clone(), loc.clone(), rent.clone()]), 2);
        assert_eq!(score(&g, &[wrong, loc.clone(), rent.clone()], true).correct, 0, "the paper's protocol stops at the first error");
        assert_eq!(correct_calls(&g, &[rent.clone(), rent]), 1);
        assert_eq!(correct_calls(&g, &[]), 0);
        // A call matched by its arguments is not spent again on a response match.
        let exact = sent("search_car_location", json!({"query": "San Diego Marriott La Jolla"}), Some(json!([{"city": "San Diego"}])));
        assert_eq!(correct_calls(&g, &[exact, loc]), 1);
    }

    #[test]
    fn no_calls_or_no_golden_calls_are_no_success() {
        let s = score(&car_gold(), &[], true);
        assert_eq!((s.golden, s.correct, s.success), (2, 0, false));
        let s = score(&gold(json!([])), &[], true);
        assert_eq!((s.golden, s.success), (0, false));
    }

    #[test]
    fn sent_calls_are_read_from_the_trace_with_references_resolved() {
        let trace = vec![
            TraceEvent::Call { label: "var1".into(), api: "travel/booking_com15/search_car_location".into(), arguments: json!({"query": "X"}).as_object().unwrap().clone(), sources: Default::default() },
            TraceEvent::Response { label: "var1".into(), api: "travel/booking_com15/search_car_location".into(), status: 200, attempts: 1, elapsed_ms: 1.0, observation: String::new(), response: Arc::new(json!([{"coordinates": {"latitude": 32.8}}])) },
            TraceEvent::Call { label: "var2".into(), api: "travel/booking_com15/search_car_rentals".into(), arguments: json!({"pick_up_latitude": "$var1.0.coordinates.latitude$"}).as_object().unwrap().clone(), sources: Default::default() },
            TraceEvent::Response { label: "var2".into(), api: "travel/booking_com15/search_car_rentals".into(), status: 404, attempts: 1, elapsed_ms: 1.0, observation: String::new(), response: Arc::new(json!({"error": "no recording"})) },
        ];
        let s = sent_calls(&trace);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].api, "search_car_location");
        assert_eq!(s[0].response, Some(json!([{"coordinates": {"latitude": 32.8}}])));
        assert_eq!(s[1].arguments["pick_up_latitude"], json!(32.8));
        assert_eq!(s[1].response, None, "a failed call has no response");
    }
}
