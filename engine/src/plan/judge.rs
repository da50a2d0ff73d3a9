//! The judgement every planner shares: a step whose response is error-shaped or empty is bad;
//! Δ = +1 per good step (+1 when a later step used its output, or when it ends a complete path),
//! -2 per bad step, -1 per failed call; the path passes when every step is usable and the request
//! is covered ([`crate::read::coverage`]). The deterministic planner judges with it; the LLM planner falls
//! back to it; the engine judges memory replays and finished plans with it.

use super::planner::{Context, Judgement};
use crate::exec::response_problem;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

fn empty_response(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => {
            m.is_empty()
                || (m.get("data").is_some_and(|d| matches!(d, Value::Null) || d.as_array().is_some_and(Vec::is_empty))
                    && m.len() <= 3)
        }
        Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// Whether a call made in subtask `i`'s search used one of the APIs retrieval found for it, and
/// one observed chains end with (a location lookup alone does not serve "rent a car").
pub(crate) fn subtask_served(ctx: &Context, i: usize) -> bool {
    let Some((_, apis)) = ctx.subtask_apis.get(i) else { return true };
    ctx.path.iter().skip(ctx.root).any(|s| apis.contains(&s.api.id) && !s.api.is_lookup())
}

/// Requirements of the request no call covers yet that more calls could cover (names are left
/// out: a name the request mentions in passing is no reason to go on calling).
pub(crate) fn open_requirements(ctx: &Context) -> usize {
    use crate::read::coverage::Kind;
    crate::read::coverage::assess(ctx).iter().filter(|r| !r.covered() && r.kind != Kind::Name).count()
}

/// Whether a step's response says it failed or holds nothing.
pub(crate) fn bad_response(v: &Value) -> Option<String> {
    if let Some(p) = response_problem(v) {
        return Some(p);
    }
    empty_response(v).then(|| "empty response".to_string())
}

/// The deterministic judgement of `ctx`'s path (also the fallback when an LLM's answer is invalid).
pub(crate) fn judge_path(ctx: &Context) -> Judgement {
    let mut bad = Vec::new();
    let fed: HashSet<String> =
        ctx.path.iter().flat_map(|s| s.arguments.values()).flat_map(crate::exec::refs::labels_in).collect();
    let coverage = crate::read::coverage::assess(ctx);
    let complete = crate::read::coverage::complete(&coverage);
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
                let bonus =
                    if fed.contains(s.label.as_str()) || (i + 1 == ctx.path.len() && complete) { 1.0 } else { 0.0 };
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
        _ if !complete => format!(
            "{n} calls with usable responses, but the request is not covered: missing {}",
            crate::read::coverage::missing_text(&coverage)
        ),
        _ => format!("{n} calls, all with usable responses, covering the request"),
    };
    Judgement {
        pass: n > 0 && bad.is_empty() && complete,
        grade,
        first_bad_step: bad.first().map(|(i, _)| *i),
        irrelevant_tools: irrelevant,
        deltas: deltas.into_iter().map(|(k, v)| (k, super::planner::clamp_delta(v))).collect(),
        reason,
        coverage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::{api, ctx};
    use crate::plan::Step;
    use serde_json::{json, Map};

    #[test]
    fn judgement_marks_the_first_bad_step() {
        let mut c = ctx("x");
        for (i, r) in
            [json!({"data": [1]}), json!({"status": false, "message": "bad id"}), json!([])].into_iter().enumerate()
        {
            c.path.push(Step {
                api: api(&format!("a{i}"), vec![]),
                label: format!("var{}", i + 1),
                arguments: Map::new(),
                sources: Default::default(),
                observation: String::new(),
                response: r.into(),
                repeat: 0,
            });
        }
        let j = judge_path(&c);
        assert!(!j.pass);
        assert_eq!(j.first_bad_step, Some(1));
        assert_eq!(j.deltas, vec![("a0".to_string(), 1.0), ("a1".to_string(), -2.0), ("a2".to_string(), -2.0)]);
        assert!((j.grade - 1.0 / 3.0).abs() < 1e-9);
    }
}
