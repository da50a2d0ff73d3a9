//! ComplexFuncBench's own metrics (Zhong et al., 2025, "ComplexFuncBench: Exploring Multi-Step and
//! Constrained Function Calling under Long-Context Scenario"): **Overall Success Rate** and
//! **Overall Call Acc.**, computed the way the benchmark's published evaluation code does
//! (`utils/compare_method.py`, `runner/base_runner.py`, `print_results.py`), ported here:
//!
//! - **Turns.** The golden calls come in turns (calls of one turn are made together). The golden
//!   calls a model may match are those of the turns reached so far: the first turn, and one more
//!   after every turn of the model's with at least one correct call. A golden turn of free
//!   functions only (below), or one holding `Search_Hotels` with `search_type: "hotel"`, is
//!   merged with the next.
//! - **Free functions.** The six location searches are optional: a call of the model equal to a
//!   golden free call anywhere in the sample is correct, and one never made does not fail the
//!   sample (except `Location_to_Lat_Long`, which the runner keeps among the calls it expects at
//!   the end, as published).
//! - **One call compared.** A call equal to a reachable golden call (name and arguments) matches
//!   it; the others are paired with the remaining golden calls (the published code pairs them by
//!   embedding similarity; here by the same API, then the most equal argument values), and each
//!   pair goes through: the *format check* (a defined function, its required parameters, no
//!   unknown parameter, JSON types) — a call failing it is neither correct nor the end; *rule
//!   match* (same name, the same set of argument names, equal values; `categories_filter` as a
//!   set of comma-separated items); the *exact-value check* (per API, the parameters of
//!   `exact_match_values.json` must equal the golden values); *response match* (both calls get
//!   the same response from the API); then the published code asks an LLM judge — **we have
//!   none, so such a call counts as incorrect, and our figures are a lower bound of the
//!   official ones**.
//! - **Response match only on exact recordings.** The official scorer calls the live API with
//!   both calls. Here the replay sandbox stands in for it only where it recorded a response for
//!   exactly the call's arguments ([`toolgraph_sandbox::Library::exact`]): its nearest-recording
//!   answer (same required arguments, most optional ones shared) is what the API would likely
//!   answer, not what it answered, and never makes a call right.
//! - **Each sample's own responses.** The published runner answers a call that matches a golden
//!   call with *that sample's* recorded observation (`success_map[t] = golden_obs`). Samples
//!   recorded on other days share calls whose responses differ (prices, offer tokens, a
//!   coordinate widened from f32 in one recording and not in another), so the replay sandbox
//!   answers a run's calls from its own sample's recordings first
//!   ([`toolgraph_sandbox::Sandbox::answer_first`]), and a call its sample never made from
//!   every call recorded in the data.
//! - **The end.** A turn with no correct call (and no format error) ends the sample. When the
//!   model stops, the sample succeeds if its last turn had no incorrect call, every golden turn
//!   was reached and every golden call left is a location search (or the hotel search) dropped
//!   at the end. Overall Success = successes / samples; Overall Call Acc. = correct calls /
//!   golden calls, over all samples (`print_results.py`).
//!
//! Where the published code is quirky it is ported as is (the hotel-search rule fires for a turn
//! that merely holds one; the end-of-run removal skips the call after one it removes, as Python's
//! `list.remove` inside a `for` does). What differs, and why:
//! - the golden turns are rebuilt from the data flow, since the chains (NESTFUL format) keep the
//!   calls' order but not their turns: a new turn starts at the first call that reads an output of
//!   a call of the current turn;
//! - golden values are typed by the API's spec (the chain keeps a reference such as
//!   `$var1.coordinates.latitude$` where the annotator typed a literal, so its type is lost);
//! - toolgraph's engine sends one call at a time, so each of its calls is a turn of its own; a
//!   predictions file (`toolgraph eval score`) may group calls into turns;
//! - the final answer's completeness (GPT-4o's 0–2 score in the paper) is not part of either
//!   figure, as in `print_results.py`; the engine's own `answered` is reported in toolgraph's own
//!   columns, never here.
//!
//! The parameter lists and function lists are facts of the benchmark, kept with their source in
//! `eval/data/complexfuncbench-protocol.json`.

use crate::gold::Gold;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use toolgraph_engine::exec::refs;
use toolgraph_engine::exec::refs::labels_in;
use toolgraph_engine::exec::CallError;
use toolgraph_engine::run::TraceEvent;
use toolgraph_ingest::complexfuncbench::Spec;
use toolgraph_sandbox::{normalize, Match, Recording};

mod recorded;
use recorded::same;
pub use recorded::{api_key, Recorded};

/// The benchmark's lists, as published (see the file's `source`).
const PROTOCOL_FILE: &str = include_str!("../data/complexfuncbench-protocol.json");

#[derive(Deserialize)]
struct ProtocolFile {
    exact_match_values: BTreeMap<String, Vec<String>>,
    free_functions: Vec<String>,
    dropped_at_end: Vec<String>,
    hotel_search: HotelSearch,
}

#[derive(Deserialize)]
struct HotelSearch {
    name: String,
    argument: String,
    value: String,
}

/// One call a run sent: the API's name (slug), the arguments as sent, and its response when it
/// succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct SentCall {
    pub api: String,
    pub arguments: Map<String, Value>,
    pub response: Option<Value>,
}

/// One sample scored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleScore {
    /// Golden calls of the sample (free functions included, as the paper counts them).
    pub golden: usize,
    /// Calls judged correct before the sample ended.
    pub correct: usize,
    pub success: bool,
    /// What ended the sample, or why it is no success (`None` on success).
    pub first_error: Option<String>,
}

/// An API's parameters as its spec declares them (the format check).
#[derive(Debug, Clone, Default)]
struct Format {
    required: Vec<String>,
    types: HashMap<String, String>,
}

/// The protocol's facts for one run of the scorer: the benchmark's lists, the APIs' specs (the
/// format check; none for an API without a spec) and the exact recordings (response match).
pub struct Protocol {
    exact_values: HashMap<String, Vec<String>>,
    free: HashSet<String>,
    dropped_at_end: HashSet<String>,
    hotel: (String, String, String),
    formats: HashMap<String, Format>,
    recorded: Recorded,
}

impl Protocol {
    /// ComplexFuncBench's protocol over these specs and recordings.
    pub fn new(specs: &[Spec], recordings: &[Recording]) -> Self {
        let file: ProtocolFile = serde_json::from_str(PROTOCOL_FILE)
            .expect("eval/data/complexfuncbench-protocol.json is valid (checked by a test)");
        let formats = specs
            .iter()
            .map(|s| {
                let required = s.query_parameters.iter().filter(|(_, p)| p.required).map(|(n, _)| n.clone()).collect();
                let types = s.query_parameters.iter().map(|(n, p)| (n.clone(), p.ty.to_ascii_lowercase())).collect();
                (api_key(&s.name), Format { required, types })
            })
            .collect();
        Protocol {
            exact_values: file.exact_match_values.into_iter().map(|(k, v)| (api_key(&k), v)).collect(),
            free: file.free_functions.iter().map(|n| api_key(n)).collect(),
            dropped_at_end: file.dropped_at_end.iter().map(|n| api_key(n)).collect(),
            hotel: (api_key(&file.hotel_search.name), file.hotel_search.argument, file.hotel_search.value),
            formats,
            recorded: Recorded::new(recordings),
        }
    }

    /// What the replay sandbox answers to this call, and how it found it.
    pub fn sandbox_answer(&self, api: &str, args: &Map<String, Value>) -> Option<(Arc<Value>, Match)> {
        self.recorded.answer(api, args)
    }

    /// Every response recorded for exactly this call (none: the API was never asked it).
    pub fn exact_responses(&self, api: &str, args: &Map<String, Value>) -> &[Arc<Value>] {
        self.recorded.exact(api, args)
    }

    fn is_hotel_search(&self, c: &Call) -> bool {
        c.api == self.hotel.0 && c.arguments.get(&self.hotel.1).and_then(Value::as_str) == Some(self.hotel.2.as_str())
    }

    /// `only_free_function`: a turn of free functions only, or one holding the hotel search.
    fn only_free(&self, calls: &[Call]) -> bool {
        calls.iter().any(|c| self.is_hotel_search(c)) || calls.iter().all(|c| self.free.contains(&c.api))
    }

    /// The format check: `None` when the call is well-formed.
    fn format_error(&self, c: &Call) -> Option<String> {
        let Some(f) = self.formats.get(&c.api) else {
            return if self.formats.is_empty() { None } else { Some(format!("function {} is not defined", c.api)) };
        };
        if let Some(m) = f.required.iter().find(|r| !c.arguments.contains_key(*r)) {
            return Some(format!("required parameter {m} missing"));
        }
        if let Some(u) = c.arguments.keys().find(|k| !f.types.contains_key(*k)) {
            return Some(format!("unknown parameter {u}"));
        }
        for (k, v) in &c.arguments {
            let ok = match f.types.get(k).map(String::as_str) {
                Some("string") => v.is_string(),
                Some("number") => v.is_number(),
                Some("boolean") => v.is_boolean(),
                Some("array") => v.is_array(),
                _ => true,
            };
            if !ok {
                return Some(format!("parameter {k} should be a {}", f.types[k]));
            }
        }
        None
    }

    /// `compare_single_call` without the LLM judge: `Ok` when correct, else why not.
    fn compare(&self, pred: &Call, gold: &Call) -> Result<(), String> {
        if rule_match(pred, gold) {
            return Ok(());
        }
        if pred.api != gold.api {
            return Err("func_error: not the golden function".into());
        }
        for k in self.exact_values.get(&pred.api).map(Vec::as_slice).unwrap_or_default() {
            let Some(g) = gold.arguments.get(k) else { continue };
            match pred.arguments.get(k) {
                None => return Err(format!("param_missing: {k} (gold {})", short(g))),
                Some(p) if !value_equal(k, p, g) => {
                    return Err(format!("value_error: {k} {} (gold {})", short(p), short(g)))
                }
                Some(_) => {}
            }
        }
        let by_response = gold.response.as_ref().is_some_and(|g| {
            self.recorded.exact(&pred.api, &pred.arguments).iter().any(|p| !is_empty_object(p) && same(p, g))
        });
        if by_response {
            return Ok(());
        }
        Err(format!(
            "no match (no exact recording gives the golden response; no LLM judge): {}",
            difference(pred, gold)
        ))
    }
}

/// A call in the scorer: API slug, literal arguments, and (golden calls) the recorded response.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    api: String,
    arguments: Map<String, Value>,
    response: Option<Value>,
}

impl Call {
    /// Name and arguments equal (the published `p_value == g_value`).
    fn same_call(&self, other: &Call) -> bool {
        self.api == other.api
            && self.arguments.len() == other.arguments.len()
            && self.arguments.iter().all(|(k, v)| other.arguments.get(k).is_some_and(|o| same(v, o)))
    }
}

fn is_empty_object(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty)
}

/// A parameter's values equal: `categories_filter` as a set of comma-separated items.
fn value_equal(key: &str, p: &Value, g: &Value) -> bool {
    if key == "categories_filter" {
        if let (Some(p), Some(g)) = (p.as_str(), g.as_str()) {
            let items = |s: &str| s.split(',').map(|x| x.trim().to_string()).collect::<HashSet<String>>();
            return items(p) == items(g);
        }
    }
    same(p, g)
}

/// Rule-based match: same name, the same set of argument names, equal values.
fn rule_match(pred: &Call, gold: &Call) -> bool {
    pred.api == gold.api
        && pred.arguments.len() == gold.arguments.len()
        && pred.arguments.iter().all(|(k, v)| gold.arguments.get(k).is_some_and(|g| value_equal(k, v, g)))
}

/// The first argument that differs (the published `get_error_message`).
fn difference(pred: &Call, gold: &Call) -> String {
    for (k, g) in &gold.arguments {
        match pred.arguments.get(k) {
            None => return format!("{k} missing (gold {})", short(g)),
            Some(p) if !value_equal(k, p, g) => return format!("{k} {} (gold {})", short(p), short(g)),
            Some(_) => {}
        }
    }
    match pred.arguments.keys().find(|k| !gold.arguments.contains_key(*k)) {
        Some(k) => format!("{k} is not a golden argument"),
        None => "arguments differ".into(),
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

/// Similarity of an unmatched call to a golden one (the published code uses embeddings): the
/// same API first, then the share of equal argument values.
fn similarity(p: &Call, g: &Call) -> f64 {
    let keys: HashSet<&String> = p.arguments.keys().chain(g.arguments.keys()).collect();
    let equal = keys
        .iter()
        .filter(|k| matches!((p.arguments.get(**k), g.arguments.get(**k)), (Some(a), Some(b)) if value_equal(k, a, b)))
        .count();
    let share = if keys.is_empty() { 1.0 } else { equal as f64 / keys.len() as f64 };
    if p.api == g.api {
        2.0 + share
    } else {
        share
    }
}

/// A golden value typed by the parameter's spec: a number where a string is declared becomes
/// its text, numeric text where a number is declared becomes the number. The chain keeps a
/// reference where the annotator typed a literal, and resolving it gives the response's type (2
/// of the 3,073 golden values), and one literal is text where the spec declares a number: typed,
/// the golden calls pass the format check a model's calls must pass.
fn typed(v: &Value, ty: Option<&str>) -> Value {
    match (v, ty) {
        (Value::Number(n), Some("string")) => Value::String(n.to_string()),
        (Value::String(s), Some("number")) => s
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .ok()
            .or_else(|| s.trim().parse::<f64>().ok().and_then(|f| serde_json::Number::from_f64(f).map(Value::Number)))
            .unwrap_or_else(|| v.clone()),
        _ => v.clone(),
    }
}

/// The golden calls of a sample, typed by the specs, in turns rebuilt from the data flow: a new
/// turn starts at the first call that reads an output of a call of the current turn.
fn golden_turns(protocol: &Protocol, gold: &Gold) -> (Vec<Call>, Vec<Vec<usize>>) {
    let mut calls = Vec::with_capacity(gold.calls.len());
    let mut turns: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut labels: HashSet<String> = HashSet::new();
    for (i, g) in gold.calls.iter().enumerate() {
        let api = api_key(&g.name);
        let format = protocol.formats.get(&api);
        let reads: HashSet<String> = g.arguments.values().flat_map(labels_in).collect();
        let arguments = g
            .resolved
            .iter()
            .map(|(k, v)| (k.clone(), typed(v, format.and_then(|f| f.types.get(k)).map(String::as_str))))
            .collect();
        if !current.is_empty() && reads.iter().any(|l| labels.contains(l)) {
            turns.push(std::mem::take(&mut current));
            labels.clear();
        }
        current.push(i);
        labels.insert(g.label.clone().unwrap_or_else(|| format!("var{}", i + 1)));
        calls.push(Call { api, arguments, response: g.response.clone() });
    }
    if !current.is_empty() {
        turns.push(current);
    }
    (calls, turns)
}

/// Every call the run sent, in order, with its arguments as they went out: those the engine
/// recorded as sent (resolved, typed by the API's schema), else the call's own with references
/// resolved (a model's calls, as it wrote them).
pub fn sent_calls(trace: &[TraceEvent]) -> Vec<SentCall> {
    let mut outputs: HashMap<String, Value> = HashMap::new();
    let mut out: Vec<SentCall> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    // The call whose outcome comes next: a failure reads as this call's only right after it.
    let mut pending: Option<usize> = None;
    for t in trace {
        match t {
            TraceEvent::Call { label, api, arguments, .. } => {
                let arguments = refs::resolve(arguments, &outputs).unwrap_or_else(|_| arguments.clone());
                open.insert(label.clone(), out.len());
                pending = Some(out.len());
                out.push(SentCall { api: api_key(api), arguments, response: None });
            }
            TraceEvent::Response { label, status, response, sent, .. } => {
                pending = None;
                if !(200..300).contains(status) {
                    continue;
                }
                if let Some(&i) = open.get(label) {
                    out[i].response = Some(response.as_ref().clone());
                    if let Some(sent) = sent {
                        out[i].arguments = sent.clone();
                    }
                }
                outputs.insert(label.clone(), response.as_ref().clone());
            }
            TraceEvent::CallFailed { api, error, sent, .. } => {
                let last = pending.take().filter(|&i| out[i].api == api_key(api));
                match (last, error) {
                    // Refused by the executor before anything was sent (arguments that do not fit
                    // the schema, a reference to nothing, a URL it cannot call): no call the API
                    // saw, as a call failing the published format check is neither counted nor
                    // the end of the sample.
                    (
                        Some(i),
                        CallError::InvalidArguments { .. }
                        | CallError::UnresolvedReference { .. }
                        | CallError::BadRequest { .. },
                    ) => {
                        out.remove(i);
                        open.retain(|_, j| *j != i);
                    }
                    (Some(i), _) => {
                        if let Some(sent) = sent {
                            out[i].arguments = sent.clone();
                        }
                    }
                    (None, _) => {}
                }
            }
            _ => {}
        }
    }
    out
}

/// `mapping_call`: each predicted call of a turn paired with the golden call it is compared with
/// (pred index, golden call): exact matches (or free calls) first, then the rest by similarity.
fn map_turn(preds: &[Call], golden: &[usize], golden_calls: &[Call], free: &mut [(Call, bool)]) -> Vec<(usize, Call)> {
    let mut pairs: Vec<(usize, Call)> = Vec::new();
    let mut taken: HashSet<usize> = HashSet::new();
    let mut remaining: Vec<usize> = Vec::new();
    for (pi, p) in preds.iter().enumerate() {
        if let Some(&gi) = golden.iter().find(|&&gi| !taken.contains(&gi) && golden_calls[gi].same_call(p)) {
            taken.insert(gi);
            pairs.push((pi, golden_calls[gi].clone()));
        } else if let Some(slot) = free.iter_mut().find(|(f, _)| f.same_call(p)) {
            slot.1 = true;
            pairs.push((pi, slot.0.clone()));
        } else {
            remaining.push(pi);
        }
    }
    let mut open: Vec<usize> = golden.iter().copied().filter(|gi| !taken.contains(gi)).collect();
    let mut rest = remaining.clone();
    while !rest.is_empty() && !open.is_empty() {
        let mut best: Option<(f64, usize, usize)> = None;
        for (ri, &pi) in rest.iter().enumerate() {
            for (oi, &gi) in open.iter().enumerate() {
                let s = similarity(&preds[pi], &golden_calls[gi]);
                if best.is_none_or(|(b, _, _)| s > b) {
                    best = Some((s, ri, oi));
                }
            }
        }
        let (_, ri, oi) = best.expect("both lists are non-empty");
        let (pi, gi) = (rest.remove(ri), open.remove(oi));
        pairs.push((pi, golden_calls[gi].clone()));
    }
    pairs
}

/// What `compare_turn_prediction` found in one turn.
struct Turn {
    errors: Vec<String>,
    format_errors: usize,
    matched: Vec<Call>,
    successes: usize,
}

/// `compare_turn_prediction`: each pair compared (a format error is not counted either way).
fn compare_turn(protocol: &Protocol, preds: &[Call], pairs: &[(usize, Call)], first: usize) -> Turn {
    let mut errors: Vec<String> = Vec::new();
    let mut format_errors = 0usize;
    let mut matched: Vec<Call> = Vec::new();
    let mut successes = 0usize;
    for (pi, g) in pairs {
        let p = &preds[*pi];
        let label = format!("call {} ({})", first + pi, p.api);
        if let Some(e) = protocol.format_error(p) {
            format_errors += 1;
            errors.push(format!("{label}: format error, not counted: {e}"));
            continue;
        }
        match protocol.compare(p, g) {
            Ok(()) => {
                successes += 1;
                matched.push(g.clone());
            }
            Err(e) => errors.push(format!("{label}: {e}")),
        }
    }
    Turn { errors, format_errors, matched, successes }
}

/// Score a run that sent `sent`, one call at a time (each call a turn of its own).
pub fn score(protocol: &Protocol, gold: &Gold, sent: &[SentCall]) -> SampleScore {
    let turns: Vec<Vec<SentCall>> = sent.iter().map(|c| vec![c.clone()]).collect();
    score_turns(protocol, gold, &turns)
}

/// Score a sample whose model made `turns` (the calls of a turn made together), as the
/// benchmark's runner walks it.
pub fn score_turns(protocol: &Protocol, gold: &Gold, turns: &[Vec<SentCall>]) -> SampleScore {
    let (golden_calls, golden_turns) = golden_turns(protocol, gold);
    let total = golden_calls.len();
    let fail =
        |correct: usize, why: String| SampleScore { golden: total, correct, success: false, first_error: Some(why) };
    if total == 0 {
        return fail(0, "no golden calls".into());
    }
    // Free calls anywhere in the sample: (call, called yet).
    let mut free: Vec<(Call, bool)> = Vec::new();
    for c in &golden_calls {
        if protocol.free.contains(&c.api) && !free.iter().any(|(f, _)| f.same_call(c)) {
            free.push((c.clone(), false));
        }
    }
    // The reachable golden calls (indices into golden_calls), the last turn reached.
    let mut golden: Vec<usize> = golden_turns[0].clone();
    let mut turn_id = 0usize;
    let extend = |golden: &mut Vec<usize>, turn_id: &mut usize| {
        *turn_id += 1;
        if let Some(t) = golden_turns.get(*turn_id) {
            golden.extend(t.iter().copied());
        }
    };
    let calls_of = |golden: &[usize]| golden.iter().map(|&i| golden_calls[i].clone()).collect::<Vec<Call>>();
    if protocol.only_free(&calls_of(&golden)) {
        extend(&mut golden, &mut turn_id);
    }
    let mut correct = 0usize;
    let mut last_errors: Vec<String> = Vec::new();
    let mut n = 0usize;
    for turn in turns {
        let preds: Vec<Call> = turn
            .iter()
            .map(|c| Call { api: api_key(&c.api), arguments: c.arguments.clone(), response: None })
            .collect();
        let first = n + 1;
        n += preds.len();
        let at =
            if preds.len() == 1 { format!("call {first} ({})", preds[0].api) } else { format!("calls {first}–{n}") };
        if golden.is_empty() {
            return fail(correct, format!("{at}: a call after every golden call was made (func_hallucination)"));
        }
        // remove_called_fc
        golden.retain(|&i| !free.iter().any(|(f, called)| *called && f.same_call(&golden_calls[i])));
        if golden.is_empty() {
            return fail(correct, format!("{at}: a call after every golden call was made (func_hallucination)"));
        }
        let pairs = map_turn(&preds, &golden, &golden_calls, &mut free);
        let Turn { errors, format_errors, matched, successes } = compare_turn(protocol, &preds, &pairs, first);
        if successes == 0 && format_errors == 0 {
            let why = errors.first().cloned().unwrap_or_else(|| format!("{at}: matches no reachable golden call"));
            return fail(correct, why);
        }
        correct += successes;
        // process_matches
        for m in &matched {
            if let Some(pos) = golden.iter().position(|&gi| golden_calls[gi].same_call(m)) {
                golden.remove(pos);
            }
        }
        if !matched.is_empty() {
            extend(&mut golden, &mut turn_id);
        }
        golden.retain(|&i| !free.iter().any(|(f, called)| *called && f.same_call(&golden_calls[i])));
        if protocol.only_free(&calls_of(&golden)) {
            extend(&mut golden, &mut turn_id);
        }
        // Incorrect calls of a turn that also had a correct one end nothing now, but fail the
        // sample if it is the last turn (the runner returns the turn's error messages).
        last_errors = errors.into_iter().filter(|e| !e.contains("format error")).collect();
    }
    if let Some(e) = last_errors.first() {
        return fail(correct, e.clone());
    }
    // return_result: the location searches and the hotel search left are dropped, as the
    // published loop does (removing from the list it walks skips the element after a removal).
    let mut i = 0;
    while i < golden.len() {
        let c = &golden_calls[golden[i]];
        if protocol.is_hotel_search(c) || protocol.dropped_at_end.contains(&c.api) {
            let first_equal = golden.iter().position(|&gi| golden_calls[gi].same_call(c)).unwrap_or(i);
            golden.remove(first_equal);
        }
        i += 1;
    }
    if turn_id < golden_turns.len() || !golden.is_empty() {
        let left: Vec<String> = golden.iter().map(|&gi| golden_calls[gi].api.clone()).collect();
        let unreached: usize = golden_turns.iter().skip(turn_id + 1).map(Vec::len).sum();
        return fail(
            correct,
            format!(
                "stopped early: {} golden call(s) not made{}",
                left.len() + unreached,
                if left.is_empty() { String::new() } else { format!(" ({})", left.join(", ")) }
            ),
        );
    }
    SampleScore { golden: total, correct, success: true, first_error: None }
}

/// Gold calls some sent call matches (by rule: the golden arguments sent with equal values,
/// normalized; else by an exact recording's response equal to the golden one), each gold call and
/// each sent call at most once, in any order and without stopping at a wrong call (API-Bank's API
/// call correctness).
pub fn correct_calls(protocol: &Protocol, gold: &Gold, sent: &[SentCall]) -> usize {
    let keys: Vec<String> = gold.calls.iter().map(|g| api_key(&g.name)).collect();
    let mut matched = vec![false; gold.calls.len()];
    let subset = |g: &Map<String, Value>, s: &Map<String, Value>| {
        g.iter().all(|(k, v)| s.get(k).is_some_and(|x| normalize(x) == normalize(v)))
    };
    // Rule matches first (an exact call is the stronger claim), then responses.
    let mut used = vec![false; sent.len()];
    for (n, call) in sent.iter().enumerate() {
        if let Some(i) = (0..gold.calls.len())
            .find(|&i| !matched[i] && keys[i] == call.api && subset(&gold.calls[i].resolved, &call.arguments))
        {
            matched[i] = true;
            used[n] = true;
        }
    }
    for (n, call) in sent.iter().enumerate() {
        if used[n] {
            continue;
        }
        let answers = protocol.exact_responses(&call.api, &call.arguments);
        if let Some(i) = (0..gold.calls.len()).find(|&i| {
            !matched[i]
                && keys[i] == call.api
                && gold.calls[i].response.as_ref().is_some_and(|g| answers.iter().any(|r| normalize(g) == normalize(r)))
        }) {
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

#[cfg(test)]
mod tests;
