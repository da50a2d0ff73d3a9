//! The deterministic planner: no model, same input → same run.
//!
//! - choose: score = (graph weight + w₀) × (similarity + s₀) × (0.5 + 0.5·availability), halved per
//!   earlier call of the same API for retriever candidates; `END` scores its weight × (s₀ + 0.5).
//!   A step that recalled memories made scores × (1 + 2·recall score). The best wins; below
//!   `min_score` the run finishes (or gives up at the root).
//! - fill (SoAy's I/O coupling first): a parameter takes a field of an earlier output with its name
//!   (or whose name it ends with: `pick_up_latitude` ← `latitude`), else a typed value of the
//!   request (dates in order, start/end aware; times; counted numbers; names; quoted strings;
//!   emails; URLs), else its documented default.
//! - judge: a step whose response is error-shaped or empty is bad; Δ = +1 per good step (+1 when a
//!   later step used its output), -2 per bad step, -1 per failed call.

use super::values::{is_date_param, is_end_param, is_time_param, RequestValues};
use super::{ApiView, ArgSource, Candidate, Context, Decision, Filled, Judgement, Planner, Usage};
use crate::exec::response_problem;
use crate::Result;
use async_trait::async_trait;
use chrono::Duration;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// Tuning of the deterministic planner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeterministicSettings {
    /// w₀: what a candidate without a graph edge weighs.
    pub weight_floor: f64,
    /// s₀: what a candidate the retriever did not rank is similar.
    pub similarity_floor: f64,
    /// Below this score nothing is worth calling.
    pub min_score: f64,
    /// How much a recalled memory's vote multiplies a candidate's score: × (1 + h·hint).
    pub hint_weight: f64,
    /// γ of the seed score (similarity + s₀)^γ · (1 + START weight).
    pub seed_sharpness: f64,
    /// `END`'s score is multiplied by this while the request has an open requirement (a date,
    /// time, count, compared option, asked-for quantity or completion no call covers yet).
    pub open_end_factor: f64,
}

impl Default for DeterministicSettings {
    fn default() -> Self {
        DeterministicSettings { weight_floor: 0.05, similarity_floor: 0.1, min_score: 0.001, hint_weight: 2.0, seed_sharpness: 4.0, open_end_factor: 0.1 }
    }
}

#[derive(Default)]
pub struct DeterministicPlanner {
    settings: DeterministicSettings,
    calls: AtomicU64,
}

impl DeterministicPlanner {
    pub fn new(settings: DeterministicSettings) -> Self {
        DeterministicPlanner { settings, calls: AtomicU64::new(0) }
    }

    /// The score of one candidate in `ctx` (public for the trace and tests).
    pub fn score(&self, ctx: &Context, c: &Candidate) -> f64 {
        let memory = 1.0 + self.settings.hint_weight * c.hint;
        memory * match &c.api {
            None => c.weight * (self.settings.similarity_floor + 0.5),
            Some(api) => {
                let avail = 0.5 + 0.5 * api.availability.unwrap_or(1.0);
                let repeats = ctx.calls_of(&api.id) as i32;
                let repeat = if c.source == super::Source::Graph { 1.0 } else { 0.5f64.powi(repeats) };
                if ctx.path.is_empty() {
                    // The seed serves the request: similarity (sharpened) decides, and the START
                    // edge — how often chains begin there, whatever they served — is a mild prior.
                    return memory * (c.similarity + self.settings.similarity_floor).powf(self.settings.seed_sharpness) * (1.0 + c.weight) * avail;
                }
                (c.weight + self.settings.weight_floor) * (c.similarity + self.settings.similarity_floor) * avail * repeat
            }
        }
    }
}

fn norm(s: &str) -> String {
    s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// The scalar fields of a response in breadth-first order, normalized name → path; arrays are
/// entered at their first element and the index left out of the path (references take the first
/// element there). Built once per step; argument filling looks fields up here.
#[derive(Debug, Default)]
pub struct FieldIndex {
    entries: Vec<(String, String)>,
    first: HashMap<String, usize>,
    /// Answers already given, by parameter name (a run asks for the same parameters often).
    memo: std::sync::Mutex<HashMap<String, Option<(String, bool)>>>,
}

impl PartialEq for FieldIndex {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl FieldIndex {
    pub fn build(v: &Value) -> Self {
        let mut idx = FieldIndex::default();
        let mut queue: VecDeque<(&Value, String, usize)> = VecDeque::from([(v, String::new(), 0)]);
        let mut seen = 0;
        while let Some((node, path, depth)) = queue.pop_front() {
            seen += 1;
            if seen > 400 || depth > 6 {
                break;
            }
            match node {
                Value::Object(m) => {
                    for (k, sub) in m {
                        let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                        if sub.is_object() || sub.is_array() {
                            queue.push_back((sub, p, depth + 1));
                        } else if !sub.is_null() {
                            let nk = norm(k);
                            idx.first.entry(nk.clone()).or_insert(idx.entries.len());
                            idx.entries.push((nk, p));
                        }
                    }
                }
                Value::Array(items) => {
                    if let Some(first) = items.first() {
                        queue.push_back((first, path, depth + 1));
                    }
                }
                _ => {}
            }
        }
        idx
    }

    /// A field for `param`: `(path, exact)`: the same name, else the first whose name the
    /// parameter ends with (`pick_up_latitude` ← `latitude`, `fromId` ← `id`) or that ends with it.
    pub fn find(&self, param: &str) -> Option<(String, bool)> {
        if let Some(hit) = self.memo.lock().ok().and_then(|m| m.get(param).cloned()) {
            return hit;
        }
        let found = self.search(param);
        if let Ok(mut m) = self.memo.lock() {
            m.insert(param.to_string(), found.clone());
        }
        found
    }

    fn search(&self, param: &str) -> Option<(String, bool)> {
        let want = norm(param);
        if want.is_empty() {
            return None;
        }
        if let Some(&i) = self.first.get(&want) {
            return Some((self.entries[i].1.clone(), true));
        }
        self.entries
            .iter()
            .find(|(nk, _)| {
                let id_link = nk == "id" && want.len() > 2 && want.ends_with("id");
                id_link || nk.len() >= 3 && (want.ends_with(nk.as_str()) || (want.len() >= 4 && nk.ends_with(&want)))
            })
            .map(|(_, p)| (p.clone(), false))
    }
}

fn find_field(ctx: &Context, step: &super::Step, param: &str) -> Option<(String, bool)> {
    match ctx.fields.get(&step.label) {
        Some(idx) => idx.find(param),
        None => FieldIndex::build(&step.response).find(param),
    }
}

/// Whether a parameter names the start or the end of a trip or span (`fromId`, `pick_up_*` /
/// `toId`, `drop_off_*`, `destination`): with two producers, the start takes the earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Start,
    End,
    Neutral,
}

fn role(name: &str) -> Role {
    let n = name.to_ascii_lowercase();
    let to_prefix = name.starts_with("to") && name[2..].chars().next().is_some_and(|c| c.is_uppercase() || c == '_');
    if ["from", "pick", "origin", "src", "source", "start"].iter().any(|k| n.starts_with(k)) {
        Role::Start
    } else if to_prefix || ["drop", "dest", "return", "end"].iter().any(|k| n.starts_with(k)) {
        Role::End
    } else {
        Role::Neutral
    }
}

fn is_name_param(name: &str, description: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let d = description.to_ascii_lowercase();
    ["query", "name", "city", "location", "place", "destination", "keyword", "term", "search", "text", "address", "country", "title"]
        .iter()
        .any(|k| n.contains(k))
        || n == "q"
        || d.contains("name of") && !n.ends_with("id")
}

fn is_numeric(ty: &str) -> bool {
    let t = ty.to_ascii_lowercase();
    t.starts_with("int") || t.starts_with("number") || t.starts_with("float") || t.starts_with("double")
}

/// Strings already used as argument values on the path.
fn used_strings(ctx: &Context) -> HashSet<String> {
    ctx.path.iter().flat_map(|s| s.arguments.values()).filter_map(|v| v.as_str().map(|s| s.to_ascii_lowercase())).collect()
}

/// Fill one parameter from the request's typed values; `repeat` = earlier calls of the same API.
/// A value the request labels with the parameter's name ("latitude: 35.77" for
/// `pick_up_latitude`); the start of a span takes the first, the end the second.
fn labelled(values: &RequestValues, p: &toolgraph_schema::ParamDoc, repeat: usize) -> Option<String> {
    let want = norm(&p.name);
    let hits: Vec<&String> = values.labelled.iter().filter(|(l, _)| l.len() >= 2 && (want == *l || want.ends_with(l.as_str()))).map(|(_, v)| v).collect();
    let mut dedup: Vec<&String> = Vec::new();
    for h in hits {
        if dedup.last() != Some(&h) {
            dedup.push(h);
        }
    }
    let i = match role(&p.name) {
        Role::End => 1 + 2 * repeat,
        Role::Start => 2 * repeat,
        Role::Neutral => repeat,
    };
    dedup.get(i).or(dedup.last()).map(|v| v.to_string())
}

fn from_request(values: &RequestValues, p: &toolgraph_schema::ParamDoc, repeat: usize, used: &HashSet<String>, avoid: &HashSet<String>) -> Option<(Value, &'static str)> {
    if let Some(v) = labelled(values, p, repeat) {
        return Some((Value::String(v), "labelled"));
    }
    if is_date_param(&p.name, &p.description) {
        if values.dates.is_empty() {
            return None;
        }
        let start = values.dates.get(repeat).or(values.dates.last()).copied()?;
        let d = if is_end_param(&p.name) { values.dates.get(repeat + 1).copied().unwrap_or(start + Duration::days(1)) } else { start };
        return Some((Value::String(d.format("%Y-%m-%d").to_string()), "date"));
    }
    if is_time_param(&p.name) {
        let t = values.times.get(repeat).or(values.times.last())?;
        return Some((Value::String(t.clone()), "time"));
    }
    if is_numeric(&p.ty) {
        return values.count_for(&p.name).map(|n| (serde_json::Number::from_f64(n).map(Value::Number).unwrap_or(Value::Null), "number")).filter(|(v, _)| !v.is_null());
    }
    let n = p.name.to_ascii_lowercase();
    if n.contains("email") {
        return values.emails.first().map(|e| (Value::String(e.clone()), "email"));
    }
    if n.contains("url") || n.contains("link") {
        return values.urls.first().map(|e| (Value::String(e.clone()), "url"));
    }
    if n.contains("phone") || n.contains("mobile") || n == "tel" || n == "telephone" {
        return values.phones.get(repeat).or(values.phones.first()).map(|e| (Value::String(e.clone()), "phone"));
    }
    if ["file", "document", "path", "attachment"].iter().any(|k| n.contains(k)) {
        if let Some(f) = values.files.first() {
            return Some((Value::String(f.clone()), "file"));
        }
    }
    if is_name_param(&p.name, &p.description) {
        // The first name not used yet (nor failed with this API), else the call's turn.
        let fresh = |s: &&String| !avoid.contains(&s.to_ascii_lowercase());
        let pick = values
            .names
            .iter()
            .filter(fresh)
            .find(|s| !used.contains(&s.to_ascii_lowercase()))
            .or_else(|| {
                let left: Vec<&String> = values.names.iter().filter(fresh).collect();
                (!left.is_empty()).then(|| left[repeat % left.len()])
            })
            .or_else(|| values.quoted.iter().find(fresh))?;
        return Some((Value::String(pick.clone()), "name"));
    }
    if is_text_param(&n) {
        // Free text (a message, a prompt, a search term): what the user quoted.
        return values.quoted.iter().find(|q| !avoid.contains(&q.to_ascii_lowercase())).map(|q| (Value::String(q.clone()), "quoted"));
    }
    None
}

/// Parameters that take free text as the user wrote it.
fn is_text_param(lower_name: &str) -> bool {
    matches!(lower_name, "message" | "msg" | "text" | "prompt" | "content" | "input" | "body" | "note" | "comment" | "question" | "term" | "keyword" | "keywords" | "q" | "search")
}

fn empty_response(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty() || (m.get("data").is_some_and(|d| matches!(d, Value::Null) || d.as_array().is_some_and(Vec::is_empty)) && m.len() <= 3),
        Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// Requirements of the request no call covers yet that more calls could cover (names are left
/// out: a name the request mentions in passing is no reason to go on calling).
/// Whether a call made in subtask `i`'s search used one of the APIs retrieval found for it, and
/// one observed chains end with (a location lookup alone does not serve "rent a car").
fn subtask_served(ctx: &Context, i: usize) -> bool {
    let Some((_, apis)) = ctx.subtask_apis.get(i) else { return true };
    ctx.path.iter().skip(ctx.root).any(|s| apis.contains(&s.api.id) && s.api.ends.is_none_or(|e| e >= super::coverage::MIN_END_WEIGHT))
}

fn open_requirements(ctx: &Context) -> usize {
    use super::coverage::Kind;
    super::coverage::assess(ctx).iter().filter(|r| !r.covered() && r.kind != Kind::Name).count()
}

/// Whether a step's response says it failed or holds nothing.
pub fn bad_response(v: &Value) -> Option<String> {
    if let Some(p) = response_problem(v) {
        return Some(p);
    }
    empty_response(v).then(|| "empty response".to_string())
}

/// Fill `api`'s parameters in `ctx` the deterministic way (also used to re-fill replayed memories).
pub fn fill_arguments(ctx: &Context, api: &ApiView) -> Filled {
    let mut out = Filled::default();
    let repeat = ctx.calls_of(&api.id);
    let used = used_strings(ctx);
    for p in &api.params {
        if let Some(v) = ctx.given.get(&p.name) {
            out.arguments.insert(p.name.clone(), v.clone());
            out.sources.insert(p.name.clone(), ArgSource::Given);
            continue;
        }
        // A repeated call takes a parameter from where the earlier call of that API took it (the
        // second rental search reads the same location as the first).
        let earlier = ctx.path.iter().rev().filter(|s| s.api.id == api.id).find_map(|s| match s.sources.get(&p.name) {
            Some(ArgSource::Output { label, path }) if ctx.path.iter().any(|x| &x.label == label) => Some((label.clone(), path.clone())),
            _ => None,
        });
        if let Some((label, path)) = earlier {
            out.arguments.insert(p.name.clone(), Value::String(format!("${label}.{path}$")));
            out.sources.insert(p.name.clone(), ArgSource::Output { label, path });
            continue;
        }
        // Earlier outputs: exact names before suffix matches; of several producers, a start
        // parameter takes the earliest, others the most recent.
        let matches: Vec<(String, String, bool)> = ctx.path.iter().filter_map(|step| find_field(ctx, step, &p.name).map(|(path, exact)| (step.label.clone(), path, exact))).collect();
        let any_exact = matches.iter().any(|m| m.2);
        let pool: Vec<&(String, String, bool)> = matches.iter().filter(|m| m.2 == any_exact).collect();
        let found = match role(&p.name) {
            Role::Start => pool.first(),
            _ => pool.last(),
        }
        .map(|m| (*m).clone());
        // Values the user gave (dates, times, labelled values) win over fields of earlier outputs.
        let literal_first = (is_date_param(&p.name, &p.description) && !ctx.values.dates.is_empty())
            || (is_time_param(&p.name) && !ctx.values.times.is_empty())
            || labelled(&ctx.values, p, repeat).is_some();
        if let Some((label, path, _)) = found.filter(|_| !literal_first) {
            out.arguments.insert(p.name.clone(), Value::String(format!("${label}.{path}$")));
            out.sources.insert(p.name.clone(), ArgSource::Output { label, path });
            continue;
        }
        let avoid: HashSet<String> = ctx.dead_ends.iter().filter(|d| d.api == api.id).filter_map(|d| d.arguments.get(&p.name)?.as_str().map(str::to_ascii_lowercase)).collect();
        if let Some((v, kind)) = from_request(&ctx.values, p, repeat, &used, &avoid) {
            if p.required || kind != "name" {
                out.arguments.insert(p.name.clone(), v);
                out.sources.insert(p.name.clone(), ArgSource::Request { kind: kind.to_string() });
                continue;
            }
        }
        if !p.required {
            continue;
        }
        // An earlier turn of the conversation (most recent first): "book the first one".
        let from_earlier = ctx.earlier.iter().rev().find_map(|e| {
            let (path, _) = e.fields.find(&p.name)?;
            let parts: Vec<&str> = path.split('.').collect();
            crate::exec::refs::lookup(&e.response, &parts).filter(|v| !v.is_null()).map(|v| (e, path.clone(), v.clone()))
        });
        if let Some((e, path, v)) = from_earlier {
            out.arguments.insert(p.name.clone(), v);
            out.sources.insert(p.name.clone(), ArgSource::Earlier { turn: e.turn, api: e.api.clone(), path });
            continue;
        }
        if let Some(d) = p.default.as_ref().filter(|d| !d.is_null() && d.as_str() != Some("")) {
            out.arguments.insert(p.name.clone(), d.clone());
            out.sources.insert(p.name.clone(), ArgSource::Default);
            continue;
        }
        out.missing.push(p.name.clone());
    }
    out
}

/// The deterministic judgement of `ctx`'s path (also the fallback when an LLM's answer is invalid).
pub fn judge_path(ctx: &Context) -> Judgement {
    let mut bad = Vec::new();
    let mut fed: HashSet<&str> = HashSet::new();
    for s in &ctx.path {
        for v in s.arguments.values() {
            if let Some(t) = v.as_str() {
                for r in crate::exec::refs::references(t) {
                    fed.insert(r.split('.').next().unwrap_or_default());
                }
            }
        }
    }
    let coverage = super::coverage::assess(ctx);
    let complete = super::coverage::complete(&coverage);
    let mut deltas: BTreeMap<String, f64> = BTreeMap::new();
    for (i, s) in ctx.path.iter().enumerate() {
        match bad_response(&s.response) {
            Some(why) => {
                bad.push((i, why));
                *deltas.entry(s.api.id.clone()).or_default() -= 2.0;
            }
            None => {
                // A step earns its bonus by feeding a later one, or by ending a complete path
                // (the last step of an unfinished one did not finish anything).
                let bonus = if fed.contains(s.label.as_str()) || (i + 1 == ctx.path.len() && complete) { 1.0 } else { 0.0 };
                *deltas.entry(s.api.id.clone()).or_default() += 1.0 + bonus;
            }
        }
    }
    for d in &ctx.dead_ends {
        *deltas.entry(d.api.clone()).or_default() -= 1.0;
    }
    let n = ctx.path.len();
    let covered = coverage.iter().filter(|r| r.covered()).count();
    let coverage_share = if coverage.is_empty() { 1.0 } else { covered as f64 / coverage.len() as f64 };
    let grade = if n == 0 { 0.0 } else { (n - bad.len()) as f64 / n as f64 * coverage_share };
    let irrelevant: Vec<String> = {
        let mut t: Vec<String> = bad.iter().map(|(i, _)| ctx.path[*i].api.tool.clone()).collect();
        t.sort();
        t.dedup();
        t
    };
    let reason = match (n, bad.first()) {
        (0, _) => "no call succeeded".to_string(),
        (_, Some((i, why))) => format!("step {} ({}) returned nothing usable: {why}", i + 1, ctx.path[*i].api.name),
        _ if !complete => format!("{n} calls with usable responses, but the request is not covered: missing {}", super::coverage::missing_text(&coverage)),
        _ => format!("{n} calls, all with usable responses, covering the request"),
    };
    Judgement {
        pass: n > 0 && bad.is_empty() && complete,
        grade,
        first_bad_step: bad.first().map(|(i, _)| *i),
        irrelevant_tools: irrelevant,
        deltas: deltas.into_iter().map(|(k, v)| (k, super::clamp_delta(v))).collect(),
        reason,
        coverage,
    }
}

/// The deterministic answer ([`super::answer::compose`]).
pub fn plain_answer(ctx: &Context) -> String {
    super::answer::compose(ctx)
}

/// Verbs that start a new request after "and" ("find the cheapest tickets and provide a seat map").
const ASKING_VERBS: &[&str] = &["provide", "find", "book", "check", "arrange", "get", "show", "tell", "give", "recommend", "search", "look", "list", "compare", "reserve", "rent", "help"];

/// Split `text` before each "and <verb>" / ", <verb>" whose verb asks for something.
fn split_on_verbs(text: &str) -> Vec<&str> {
    let mut cuts = vec![0];
    let lower = text.to_ascii_lowercase();
    for sep in [" and ", ", "] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(sep) {
            let at = from + i;
            let rest = &lower[at + sep.len()..];
            let word: String = rest.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            if ASKING_VERBS.contains(&word.as_str()) {
                cuts.push(at);
            }
            from = at + sep.len();
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    for (k, &c) in cuts.iter().enumerate() {
        let end = cuts.get(k + 1).copied().unwrap_or(text.len());
        let part = text[c..end].trim_start_matches(',').trim();
        let part = part.strip_prefix("and ").unwrap_or(part);
        out.push(part);
    }
    out
}

/// Split on sentence ends, "and then" / "then" / "also" and "and <verb>": each part that asks
/// for something.
pub fn split_request(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        cur.push(ch);
        // A sentence ends at . ? ! ; followed by a space or the end (not inside an e-mail
        // address, a URL or a number).
        if matches!(ch, '.' | '?' | '!' | ';') && chars.peek().is_none_or(|c| c.is_whitespace()) {
            parts.push(std::mem::take(&mut cur));
        }
    }
    parts.push(cur);
    let mut out = Vec::new();
    for p in parts {
        for q in p.split(" and then ").flat_map(|x| x.split(" Then ")).flat_map(|x| x.split(" Also, ")).flat_map(split_on_verbs) {
            let q = q.trim();
            if q.split_whitespace().count() >= 3 && !q.to_ascii_lowercase().starts_with("today is") {
                out.push(q.to_string());
            }
        }
    }
    if out.is_empty() {
        out.push(text.trim().to_string());
    }
    out
}

/// The deterministic decomposition: [`split_request`]'s parts as subtasks (no category: retrieval
/// decides where each belongs).
pub fn subtasks_of(text: &str) -> Vec<super::Subtask> {
    split_request(text).iter().enumerate().map(|(i, t)| super::Subtask::of_text(i, t)).collect()
}

/// The deterministic plan: the best-ranked solution whose first API the request can start (its
/// required inputs all fillable from the request or the user's values), arguments filled as each
/// step runs.
pub fn best_plan(ctx: &Context, solutions: &[super::program::SolutionView]) -> Option<super::program::Plan> {
    let s = solutions.iter().find(|s| s.apis.first().is_some_and(|a| fill_arguments(ctx, a).missing.is_empty()))?;
    Some(super::program::Plan {
        steps: s.apis.iter().map(|a| super::program::PlanStep { api: a.id.clone(), arguments: None, for_each: None, when: None }).collect(),
        solution: Some(s.index),
        source: "deterministic".into(),
    })
}

#[async_trait]
impl Planner for DeterministicPlanner {
    fn name(&self) -> &'static str {
        "deterministic"
    }

    async fn decompose(&self, ctx: &Context) -> Result<Vec<super::Subtask>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(subtasks_of(&ctx.request))
    }

    async fn plan(&self, ctx: &Context, solutions: &[super::program::SolutionView]) -> Result<Option<super::program::Plan>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(best_plan(ctx, solutions))
    }

    async fn choose(&self, ctx: &Context, candidates: &[Candidate]) -> Result<Decision> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // Finishing while the request names something no call covered yet is worth little.
        // Where the current (sub)task's search began: nothing is complete before its first call.
        let at_root = ctx.path.len() <= ctx.root;
        let open = if !at_root && candidates.iter().any(Candidate::is_end) {
            match ctx.focus {
                // A subtask before the last one is open until one of its own APIs answered.
                Some(i) if i + 1 < ctx.subtasks.len() => usize::from(!subtask_served(ctx, i)),
                _ => open_requirements(ctx),
            }
        } else {
            0
        };
        // A subtask before the last one is done once served: the next subtask takes over.
        if let Some(i) = ctx.focus.filter(|i| i + 1 < ctx.subtasks.len() && !at_root) {
            if subtask_served(ctx, i) {
                return Ok(Decision::Finish { reason: format!("subtask {} is served", i + 1) });
            }
        }
        // No observed chain goes on from here (every candidate comes from retrieval alone, as for
        // tools no trajectory has used yet) and nothing the request asks for is open: done.
        if !at_root && !candidates.is_empty() && candidates.iter().all(|c| !c.is_end() && c.weight <= 0.0) && open_requirements(ctx) == 0 {
            return Ok(Decision::Finish { reason: "every requirement is covered and no observed chain goes on".into() });
        }
        let best = candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| !(c.is_end() && at_root))
            .map(|(i, c)| (i, if c.is_end() && open > 0 { self.score(ctx, c) * self.settings.open_end_factor } else { self.score(ctx, c) }))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        Ok(match best {
            None if at_root => Decision::GiveUp { reason: "no candidate API".into() },
            None => Decision::Finish { reason: "no candidate left".into() },
            Some((i, _)) if candidates[i].is_end() => Decision::Finish { reason: format!("END is the most likely successor (weight {:.3})", candidates[i].weight) },
            Some((_, s)) if s < self.settings.min_score && at_root => Decision::GiveUp { reason: format!("best candidate scores {s:.3} < {}", self.settings.min_score) },
            Some((_, s)) if s < self.settings.min_score => Decision::Finish { reason: format!("best candidate scores {s:.3} < {}", self.settings.min_score) },
            Some((i, s)) => Decision::Call { index: i, reason: format!("score {s:.3} (weight {:.3}, similarity {:.3})", candidates[i].weight, candidates[i].similarity) },
        })
    }

    async fn fill(&self, ctx: &Context, api: &ApiView, _offers: &[super::Offer]) -> Result<Filled> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(fill_arguments(ctx, api))
    }

    async fn judge(&self, ctx: &Context) -> Result<Judgement> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(judge_path(ctx))
    }

    async fn answer(&self, ctx: &Context) -> Result<String> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(plain_answer(ctx))
    }

    fn usage(&self) -> Usage {
        Usage { calls: self.calls.load(Ordering::Relaxed), ..Usage::default() }
    }
}

/// Arguments of `m` as a sorted JSON text (for comparing planned calls).
pub fn canonical(m: &Map<String, Value>) -> String {
    let sorted: BTreeMap<&String, &Value> = m.iter().collect();
    serde_json::to_string(&sorted).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Source, Step};
    use chrono::NaiveDate;
    use serde_json::json;
    use std::sync::Arc;
    use toolgraph_schema::ParamDoc;

    fn p(name: &str, ty: &str, required: bool) -> ParamDoc {
        ParamDoc { name: name.into(), ty: ty.into(), description: String::new(), required, default: None }
    }
    fn api(id: &str, params: Vec<ParamDoc>) -> Arc<ApiView> {
        Arc::new(ApiView { id: id.into(), name: id.into(), tool: "t".into(), category: "c".into(), description: String::new(), params, output_fields: vec![], availability: None, ends: None })
    }

    fn ctx(text: &str) -> Context {
        Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()))
    }

    #[test]
    fn a_later_turn_takes_what_the_request_lacks_from_earlier_turns() {
        let mut c = ctx("Book the first one for me");
        let book = api("book", vec![p("hotel_id", "number", true), p("currency", "string", false)]);
        assert_eq!(fill_arguments(&c, &book).missing, vec!["hotel_id".to_string()]);
        let older = Arc::new(json!({"data": [{"hotel_id": 7}]}));
        let newer = Arc::new(json!({"data": {"hotels": [{"hotel_id": 42, "name": "Ritz"}]}}));
        c.earlier = vec![crate::plan::Earlier::new(1, "hotels in Rome", "search", older), crate::plan::Earlier::new(2, "hotels in Paris", "search", newer)];
        let f = fill_arguments(&c, &book);
        assert_eq!(f.arguments["hotel_id"], json!(42), "the most recent turn wins");
        assert!(matches!(&f.sources["hotel_id"], ArgSource::Earlier { turn: 2, .. }));
        assert!(!f.arguments.contains_key("currency"), "optional parameters are not filled from earlier turns");
    }

    #[test]
    fn fills_from_outputs_then_request_then_defaults() {
        let mut c = ctx("Today is October 13th, 2024. I want to rent a car at the San Diego Marriott La Jolla at 8 AM tomorrow and the day after tomorrow.");
        let loc = api("loc", vec![p("query", "string", true)]);
        let f = fill_arguments(&c, &loc);
        assert_eq!(f.arguments["query"], json!("San Diego Marriott La Jolla"));
        assert!(f.missing.is_empty());
        c.path.push(Step {
            api: loc,
            label: "var1".into(),
            arguments: f.arguments,
            sources: f.sources,
            observation: String::new(),
            response: json!([{"city": "San Diego", "coordinates": {"latitude": 32.87, "longitude": -117.2}}]).into(),
            repeat: 0,
        });
        let mut with_default = p("currency", "string", true);
        with_default.default = Some(json!("USD"));
        let rent = api("rent", vec![p("pick_up_latitude", "number", true), p("pick_up_date", "string", true), p("drop_off_date", "string", true), p("pick_up_time", "string", true), with_default, p("driver_id", "string", true), p("adults", "number", false)]);
        let f = fill_arguments(&c, &rent);
        assert_eq!(f.arguments["pick_up_latitude"], json!("$var1.coordinates.latitude$"));
        assert_eq!(f.arguments["pick_up_date"], json!("2024-10-14"));
        assert_eq!(f.arguments["drop_off_date"], json!("2024-10-15"));
        assert_eq!(f.arguments["pick_up_time"], json!("08:00"));
        assert_eq!(f.arguments["currency"], json!("USD"));
        assert_eq!(f.missing, vec!["driver_id"]);
        assert!(!f.arguments.contains_key("adults"), "optional with no value stays out");
    }

    #[tokio::test]
    async fn end_wins_when_heavier_and_repeats_are_damped() {
        let planner = DeterministicPlanner::default();
        let mut c = ctx("find hotels");
        let a = api("a", vec![]);
        let root = vec![Candidate { id: "END".into(), source: Source::Graph, weight: 0.9, similarity: 0.0, hint: 0.0, api: None }, Candidate { id: "a".into(), source: Source::Retriever, weight: 0.0, similarity: 0.5, hint: 0.0, api: Some(a.clone()) }];
        assert!(matches!(planner.choose(&c, &root).await.unwrap(), Decision::Call { index: 1, .. }), "END is never chosen before the first call");
        c.path.push(Step { api: api("x", vec![]), label: "var1".into(), arguments: Map::new(), sources: Default::default(), observation: String::new(), response: json!({"a": 1}).into(), repeat: 0 });
        let cands = vec![
            Candidate { id: "a".into(), source: Source::Retriever, weight: 0.0, similarity: 0.5, hint: 0.0, api: Some(a.clone()) },
            Candidate { id: "END".into(), source: Source::Graph, weight: 0.9, similarity: 0.0, hint: 0.0, api: None },
        ];
        assert!(matches!(planner.choose(&c, &cands).await.unwrap(), Decision::Finish { .. }));
        let cands = vec![
            Candidate { id: "a".into(), source: Source::Graph, weight: 0.6, similarity: 0.5, hint: 0.0, api: Some(a) },
            Candidate { id: "END".into(), source: Source::Graph, weight: 0.4, similarity: 0.0, hint: 0.0, api: None },
        ];
        // a: (0.6 + 0.05) · (0.5 + 0.1) = 0.39 > END: 0.4 · 0.6 = 0.24
        assert_eq!(planner.choose(&c, &cands).await.unwrap(), Decision::Call { index: 0, reason: "score 0.390 (weight 0.600, similarity 0.500)".into() });
        assert!(matches!(planner.choose(&c, &[]).await.unwrap(), Decision::Finish { .. }));
        assert!(matches!(planner.choose(&ctx("x"), &[]).await.unwrap(), Decision::GiveUp { .. }));
    }

    #[test]
    fn judgement_marks_the_first_bad_step() {
        let mut c = ctx("x");
        for (i, r) in [json!({"data": [1]}), json!({"status": false, "message": "bad id"}), json!([])].into_iter().enumerate() {
            c.path.push(Step { api: api(&format!("a{i}"), vec![]), label: format!("var{}", i + 1), arguments: Map::new(), sources: Default::default(), observation: String::new(), response: r.into(), repeat: 0 });
        }
        let j = judge_path(&c);
        assert!(!j.pass);
        assert_eq!(j.first_bad_step, Some(1));
        assert_eq!(j.deltas, vec![("a0".to_string(), 1.0), ("a1".to_string(), -2.0), ("a2".to_string(), -2.0)]);
        assert!((j.grade - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn requests_split_into_subtasks() {
        assert_eq!(split_request("Today is May 1st. Find a hotel in Rome. Then list attractions near it."), vec!["Find a hotel in Rome.", "list attractions near it."]);
        assert_eq!(split_request("weather"), vec!["weather"]);
        // Dots inside addresses and numbers do not end a sentence.
        assert_eq!(split_request("Book a room for anna@example.com at 4.5 stars on 2024-06-01."), vec!["Book a room for anna@example.com at 4.5 stars on 2024-06-01."]);
        assert_eq!(
            split_request("Could you find the cheapest air tickets for me and provide detailed flight info and a seat map?"),
            vec!["Could you find the cheapest air tickets for me", "provide detailed flight info and a seat map?"]
        );
    }
}
