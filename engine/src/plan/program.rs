//! Plan mode (SoAy): a whole plan as one program, chosen from a **solution library** of I/O-coupled
//! API paths the graph holds.
//!
//! A solution is a path of 1..=`max_steps` distinct APIs where each API's output can feed the next
//! one's input: a FEEDS edge, or a `NEXT` edge (an observed succession) whose source outputs a field
//! that provides one of the target's parameters. Solutions are derived from the graph when plan
//! mode first needs them and ranked per request by the retrieval similarity of their APIs; a
//! solution is **valid** for a request when its first API's required inputs can be filled from the
//! request (or the user's given values).
//!
//! A [`Plan`] is a list of steps: the API, its arguments (values, `$varN.path$` references to
//! earlier steps' outputs, or — under `for_each` — `$item.path$` into each element of a list
//! output), an optional `for_each` (a reference to a list: the step runs once per element, at most
//! [`MAX_ITEMS`]) and an optional `if` (a condition on an earlier output: the step is skipped when
//! it does not hold). Every plan is checked before anything runs: known APIs, known parameters,
//! required ones present, references only to earlier steps, no invented identifiers.

use super::planner::{ApiView, Context};
pub(crate) use super::planner::{Condition, Plan, PlanStep, SolutionView};
use crate::exec::refs::{self, Reference};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use toolgraph_schema::fields::{field_key, link};
use toolgraph_schema::{GraphSnapshot, START_ID};

/// A `for_each` step runs at most this many times.
pub(crate) const MAX_ITEMS: usize = 5;
/// A plan has at most this many steps.
pub(crate) const MAX_STEPS: usize = 10;

/// One path of the solution library (API ids in call order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Solution {
    pub apis: Vec<String>,
    /// Product of the static NEXT weights along the path (START → first included), floored.
    pub weight: f64,
}

/// The library: every solution, indexed by the APIs it holds.
#[derive(Debug, Default)]
pub(crate) struct SolutionLibrary {
    pub solutions: Vec<Solution>,
    by_api: HashMap<String, Vec<usize>>,
}

/// Weight given to an edge the graph has not observed (a FEEDS-only coupling).
const UNSEEN_EDGE: f64 = 0.05;

impl SolutionLibrary {
    /// Derive the solutions of `graph` over the active `apis`: paths of up to `max_steps` APIs,
    /// at most `per_start` per first API (heaviest first).
    pub(crate) fn build(
        graph: &GraphSnapshot,
        apis: &HashMap<String, Arc<ApiView>>,
        max_steps: usize,
        per_start: usize,
    ) -> Self {
        // The coupling edges a → b.
        let mut out: HashMap<&str, Vec<(&str, f64)>> = HashMap::new();
        let mut pairs: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (a, b) in graph.feeds.keys() {
            if apis.contains_key(a) && apis.contains_key(b) && a != b {
                pairs.insert((a.as_str(), b.as_str()));
            }
        }
        for (a, b) in graph.next.keys() {
            let (Some(x), Some(y)) = (apis.get(a), apis.get(b)) else {
                continue;
            };
            if a == b || pairs.contains(&(a.as_str(), b.as_str())) {
                continue;
            }
            let leaves: HashSet<String> = x.output_fields.iter().map(|f| field_key(f)).collect();
            let coupled = y.params.iter().any(|p| {
                let want = field_key(&p.name);
                leaves.iter().any(|l| link(l, &want).is_some())
            });
            if coupled {
                pairs.insert((a.as_str(), b.as_str()));
            }
        }
        // An edge's observed static weight, floored for couplings never observed.
        let weight = |a: &str, b: &str| {
            graph.next.get(&(a.to_string(), b.to_string())).map(|e| e.static_weight).unwrap_or(0.0).max(UNSEEN_EDGE)
        };
        for (a, b) in pairs {
            out.entry(a).or_default().push((b, weight(a, b)));
        }
        for v in out.values_mut() {
            v.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(y.0)));
        }
        let mut solutions = Vec::new();
        let mut starts: Vec<&String> = apis.keys().collect();
        starts.sort();
        for start in starts {
            let w0 = weight(START_ID, start);
            let mut found: Vec<Solution> = vec![Solution { apis: vec![start.clone()], weight: w0 }];
            let mut stack: Vec<(Vec<&str>, f64)> = vec![(vec![start.as_str()], w0)];
            while let Some((path, w)) = stack.pop() {
                if path.len() >= max_steps.max(1) {
                    continue;
                }
                let last = *path.last().unwrap_or(&"");
                for (next, ew) in out.get(last).into_iter().flatten() {
                    if path.contains(next) {
                        continue;
                    }
                    let mut p = path.clone();
                    p.push(next);
                    found.push(Solution { apis: p.iter().map(|s| s.to_string()).collect(), weight: w * ew });
                    stack.push((p, w * ew));
                }
                if found.len() > per_start * 8 {
                    break;
                }
            }
            found.sort_by(|a, b| {
                b.weight.total_cmp(&a.weight).then(a.apis.len().cmp(&b.apis.len())).then(a.apis.cmp(&b.apis))
            });
            found.truncate(per_start.max(1));
            solutions.extend(found);
        }
        let mut by_api: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, s) in solutions.iter().enumerate() {
            for a in &s.apis {
                by_api.entry(a.clone()).or_default().push(i);
            }
        }
        SolutionLibrary { solutions, by_api }
    }

    /// The `k` solutions closest to a request, given the retrieval similarity (max-normalized) of
    /// its candidate APIs: each API adds `similarity − min_similarity` (unrelated APIs cost), plus
    /// the path's graph weight (how often observed chains made exactly these steps). Only solutions
    /// with at least one retrieved API are scored.
    pub(crate) fn rank(&self, sims: &HashMap<String, f64>, min_similarity: f64, k: usize) -> Vec<(usize, f64)> {
        let mut seen: HashSet<usize> = HashSet::new();
        let mut scored: Vec<(usize, f64)> = Vec::new();
        for id in sims.keys() {
            for &i in self.by_api.get(id).into_iter().flatten() {
                if !seen.insert(i) {
                    continue;
                }
                let s = &self.solutions[i];
                let fit: f64 = s.apis.iter().map(|a| sims.get(a).copied().unwrap_or(0.0) - min_similarity).sum();
                scored.push((i, fit + s.weight.min(1.0)));
            }
        }
        scored.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(self.solutions[a.0].apis.len().cmp(&self.solutions[b.0].apis.len()))
                .then(a.0.cmp(&b.0))
        });
        scored.truncate(k);
        scored
    }
}

const OPS: &[&str] = &["exists", "nonempty", "eq", "ne", "gt", "lt"];

/// Whether a condition holds on `outputs` (plan label → output).
pub(crate) fn holds(c: &Condition, outputs: &HashMap<String, &Value>) -> Result<bool, String> {
    let r = Reference::whole(&c.reference).ok_or_else(|| format!("condition `{}` is not a reference", c.reference))?;
    let label = &r.label;
    let out = outputs.get(label).ok_or_else(|| format!("condition refers to `{label}`, which did not run"))?;
    let v = refs::lookup(out, &r.segments());
    let num = |x: &Value| x.as_f64().or_else(|| x.as_str().and_then(|s| s.trim().parse().ok()));
    Ok(match c.op.as_str() {
        "exists" => v.is_some_and(|v| !v.is_null()),
        "nonempty" => match v {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(m)) => !m.is_empty(),
            Some(Value::String(s)) => !s.trim().is_empty(),
            Some(_) => true,
        },
        "eq" => v.is_some_and(|v| loosely_equal(v, &c.value)),
        "ne" => !v.is_some_and(|v| loosely_equal(v, &c.value)),
        "gt" => matches!((v.and_then(num), num(&c.value)), (Some(a), Some(b)) if a > b),
        "lt" => matches!((v.and_then(num), num(&c.value)), (Some(a), Some(b)) if a < b),
        other => return Err(format!("unknown condition `{other}`")),
    })
}

/// Equal as values a user would compare: numbers by value (`"3"` = 3), strings without case.
fn loosely_equal(a: &Value, b: &Value) -> bool {
    let num = |x: &Value| x.as_f64().or_else(|| x.as_str().and_then(|s| s.trim().parse().ok()));
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => match (a, b) {
            (Value::String(x), Value::String(y)) => x.trim().eq_ignore_ascii_case(y.trim()),
            _ => a == b,
        },
    }
}

/// Whether a parameter name holds an identifier (`hotel_id`, `id`, `dest_ids`).
pub(crate) fn id_like(param: &str) -> bool {
    let n = field_key(param);
    n == "id" || n == "ids" || (n.len() > 2 && (n.ends_with("id") || n.ends_with("ids")))
}

fn contains_scalar(v: &Value, want: &str, budget: &mut usize) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    match v {
        Value::String(s) => s.trim().eq_ignore_ascii_case(want),
        Value::Number(n) => n.to_string() == want,
        Value::Array(a) => a.iter().any(|x| contains_scalar(x, want, budget)),
        Value::Object(m) => m.values().any(|x| contains_scalar(x, want, budget)),
        _ => false,
    }
}

/// `Some(why)` when `value` of identifier parameter `param` appears in neither the request, the
/// values the user gave, nor any output of this run or of earlier turns: an invented identifier.
/// References and non-identifier parameters always pass.
pub(crate) fn invented_id(ctx: &Context, param: &str, value: &Value) -> Option<String> {
    if !id_like(param) {
        return None;
    }
    let text = match value {
        Value::String(s) if !Reference::all_in(s).is_empty() => return None,
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => return items.iter().find_map(|x| invented_id(ctx, param, x)),
        _ => return None,
    };
    if text.is_empty() || ctx.request.to_lowercase().contains(&text.to_lowercase()) {
        return None;
    }
    if ctx.given.values().any(|g| contains_scalar(g, &text, &mut 1000)) {
        return None;
    }
    let mut budget = 200_000;
    if ctx.path.iter().any(|s| contains_scalar(&s.response, &text, &mut budget))
        || ctx.earlier.iter().any(|e| contains_scalar(&e.response, &text, &mut budget))
    {
        return None;
    }
    Some(format!("`{param}` = {value} appears in neither the request nor any earlier output (an invented identifier)"))
}

/// Check a plan an LLM wrote against the APIs offered (the solutions' APIs and `extra`), their
/// schemas and the request; API names are resolved to ids.
pub(crate) fn parse_plan(v: &Value, ctx: &Context, offered: &[Arc<ApiView>], source: &str) -> Result<Plan, String> {
    let steps = v.get("steps").and_then(Value::as_array).ok_or("`steps` must be a list")?;
    if steps.is_empty() || steps.len() > MAX_STEPS {
        return Err(format!("a plan has 1 to {MAX_STEPS} steps, got {}", steps.len()));
    }
    let solution = v.get("solution").and_then(Value::as_u64).map(|n| n as usize);
    let mut out = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let at = format!("step {} (var{})", i + 1, i + 1);
        let name = s.get("api").and_then(Value::as_str).ok_or_else(|| format!("{at}: `api` is missing"))?;
        let api = offered
            .iter()
            .find(|a| a.id == name)
            .or_else(|| offered.iter().find(|a| a.name == name))
            .ok_or_else(|| format!("{at}: `{name}` is not one of the APIs offered"))?;
        let args = match s.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(format!("{at}: `arguments` must be an object")),
        };
        let known: HashSet<&str> = api.params.iter().map(|p| p.name.as_str()).collect();
        if let Some(k) = args.keys().find(|k| !known.contains(k.as_str())) {
            return Err(format!("{at}: `{k}` is not a parameter of {}", api.name));
        }
        if let Some(p) = api.params.iter().find(|p| p.required && args.get(&p.name).is_none_or(Value::is_null)) {
            return Err(format!("{at}: required `{}` of {} is missing", p.name, api.name));
        }
        let for_each = match s.get("for_each") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) if r.trim().is_empty() => None,
            Some(Value::String(r)) => Some(r.trim().to_string()),
            Some(_) => return Err(format!("{at}: `for_each` must be a reference string like $var1.data$")),
        };
        let when: Option<Condition> = match s.get("if") {
            None | Some(Value::Null) => None,
            Some(c) => Some(serde_json::from_value(c.clone()).map_err(|e| format!("{at}: `if`: {e}"))?),
        };
        let earlier = |label: &str| {
            label.strip_prefix("var").and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n >= 1 && n <= i)
        };
        let mut labels = Vec::new();
        labels.extend(refs::labels_in(&Value::Object(args.clone())));
        for l in &labels {
            if l == "item" {
                if for_each.is_none() {
                    return Err(format!("{at}: `$item…$` is used without `for_each`"));
                }
            } else if !earlier(l) {
                return Err(format!("{at}: reference to `{l}`, which is not an earlier step"));
            }
        }
        if let Some(r) = &for_each {
            let ok = Reference::whole(r).is_some_and(|r| earlier(&r.label));
            if !ok {
                return Err(format!(
                    "{at}: `for_each` must reference a list of an earlier step, like $var1.data$ (got {r})"
                ));
            }
        }
        if let Some(c) = &when {
            if !OPS.contains(&c.op.as_str()) {
                return Err(format!("{at}: condition `{}` is not one of {}", c.op, OPS.join(", ")));
            }
            if !Reference::whole(&c.reference).is_some_and(|r| earlier(&r.label)) {
                return Err(format!("{at}: the condition must refer to an earlier step, like $var1.data$"));
            }
        }
        for (k, v) in &args {
            if let Some(why) = invented_id(ctx, k, v) {
                return Err(format!("{at}: {why}"));
            }
        }
        out.push(PlanStep { api: api.id.clone(), arguments: Some(args), for_each, when });
    }
    Ok(Plan { steps: out, solution, source: source.to_string() })
}

/// Rewrite plan references (`$var2.x$` → `$<label of step 2>.x$`; `$item.y$` → the element's
/// path) into references the executor resolves against the run's path.
pub(crate) fn rewrite(v: &Value, labels: &HashMap<String, String>, item: Option<&Reference>) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => {
            let mut text = s.clone();
            for r in Reference::all_in(s) {
                let head = r.label.as_str();
                let new = if head == "item" {
                    item.ok_or("`$item$` outside a for_each step")?.join(&r.path)
                } else {
                    let label = labels.get(head).ok_or_else(|| format!("`{head}` did not run (skipped or failed)"))?;
                    Reference::new(label.clone(), r.path.clone())
                };
                text = text.replacen(&r.to_string(), &new.to_string(), 1);
            }
            Value::String(text)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| rewrite(x, labels, item)).collect::<Result<_, _>>()?),
        Value::Object(m) => Value::Object(
            m.iter().map(|(k, x)| Ok((k.clone(), rewrite(x, labels, item)?))).collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgraph_schema::ParamDoc;

    fn api(name: &str, params: &[(&str, bool)], outputs: &[&str]) -> Arc<ApiView> {
        Arc::new(ApiView {
            id: format!("c/t/{name}"),
            name: name.into(),
            tool: "t".into(),
            category: "c".into(),
            description: String::new(),
            params: params
                .iter()
                .map(|(n, r)| ParamDoc {
                    name: n.to_string(),
                    ty: "string".into(),
                    description: String::new(),
                    required: *r,
                    default: None,
                })
                .collect(),
            output_fields: outputs.iter().map(|s| s.to_string()).collect(),
            availability: None,
            ends: None,
        })
    }

    #[test]
    fn plans_are_checked_before_anything_runs() {
        let find = api("Find_Hotel", &[("city", true)], &["data.hotel_id"]);
        let book = api("Book_Room", &[("hotel_id", true), ("date", false)], &["booking"]);
        let offered = vec![find, book];
        let ctx = Context::new("Book a hotel room in Rome", Default::default());
        let ok = json!({"steps": [{"api": "Find_Hotel", "arguments": {"city": "Rome"}}, {"api": "Book_Room", "for_each": "$var1.data$", "arguments": {"hotel_id": "$item.hotel_id$"}, "if": {"ref": "$var1.data$", "op": "nonempty"}}]});
        let p = parse_plan(&ok, &ctx, &offered, "llm").unwrap();
        assert_eq!(p.steps[1].api, "c/t/Book_Room");
        let bad = |v: Value| parse_plan(&v, &ctx, &offered, "llm").unwrap_err();
        assert!(bad(json!({"steps": [{"api": "Fly", "arguments": {}}]})).contains("not one of the APIs offered"));
        assert!(bad(json!({"steps": [{"api": "Book_Room", "arguments": {}}]})).contains("required `hotel_id`"));
        assert!(bad(json!({"steps": [{"api": "Book_Room", "arguments": {"hotel_id": "H-99812"}}]}))
            .contains("invented identifier"));
        assert!(bad(json!({"steps": [{"api": "Book_Room", "arguments": {"hotel_id": "$var1.data.hotel_id$"}}]}))
            .contains("not an earlier step"));
        assert!(bad(json!({"steps": [{"api": "Find_Hotel", "arguments": {"city": "Rome", "x": 1}}]}))
            .contains("`x` is not a parameter"));
        assert!(bad(json!({"steps": [{"api": "Find_Hotel", "arguments": {"city": "$item.c$"}}]}))
            .contains("without `for_each`"));
        assert!(bad(json!({"steps": []})).contains("1 to 10 steps"));
    }

    #[test]
    fn conditions_and_rewrites() {
        let out = json!({"data": [{"hotel_id": 7}], "count": 3});
        let outputs: HashMap<String, &Value> = [("var1".to_string(), &out)].into_iter().collect();
        let c = |op: &str, value: Value| Condition { reference: "$var1.count$".into(), op: op.into(), value };
        assert!(holds(&c("gt", json!(2)), &outputs).unwrap());
        assert!(!holds(&c("lt", json!(2)), &outputs).unwrap());
        assert!(holds(&c("eq", json!("3")), &outputs).unwrap());
        assert!(holds(
            &Condition { reference: "$var1.data$".into(), op: "nonempty".into(), value: Value::Null },
            &outputs
        )
        .unwrap());
        assert!(!holds(
            &Condition { reference: "$var1.missing$".into(), op: "exists".into(), value: Value::Null },
            &outputs
        )
        .unwrap());
        let labels: HashMap<String, String> = [("var1".to_string(), "var3".to_string())].into_iter().collect();
        assert_eq!(
            rewrite(
                &json!({"a": "$var1.data.0.hotel_id$", "b": "$item.x$ and $var1.count$"}),
                &labels,
                Some(&Reference::new("var3", "data.1"))
            )
            .unwrap(),
            json!({"a": "$var3.data.0.hotel_id$", "b": "$var3.data.1.x$ and $var3.count$"})
        );
        assert!(rewrite(&json!("$var2.x$"), &labels, None).unwrap_err().contains("did not run"));
    }

    #[test]
    fn identifiers_must_come_from_somewhere() {
        let mut ctx = Context::new("Book hotel 4411 for me", Default::default());
        assert!(invented_id(&ctx, "hotel_id", &json!(4411)).is_none(), "named in the request");
        assert!(invented_id(&ctx, "hotel_id", &json!("H-99812")).is_some());
        assert!(invented_id(&ctx, "city", &json!("Nowhere")).is_none(), "not an identifier parameter");
        assert!(
            invented_id(&ctx, "hotel_id", &json!("$var1.id$")).is_none(),
            "references are checked when they resolve"
        );
        ctx.given.insert("guest_id".into(), json!("G-7"));
        assert!(invented_id(&ctx, "guest_id", &json!("G-7")).is_none(), "given by the user");
    }
}
