//! What a model may reply: the JSON schema of each decision it is asked (constraining a server
//! that supports `response_format: json_schema`) and the check of a reply against what was
//! offered — the candidates, the API's parameters, the path, the remembered chains, the mentions —
//! before the engine acts on it. A reply that fails its check is never acted on.

use super::planner::{
    ApiView, Candidate, Context, Decision, Filled, Judgement, Offer, ProviderPick, Recollection, Subtask,
    UnsureMentions,
};
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// JSON schema of the answer to "which remembered request asks for the same things" (0: none).
pub fn recall_schema(n: usize) -> Value {
    json!({
        "type": "object",
        "properties": {"pick": {"type": "integer", "minimum": 0, "maximum": n}},
        "required": ["pick"],
        "additionalProperties": false
    })
}

/// The model's pick among `n` remembered requests (1-based; 0: none).
pub fn parse_recall(v: &Value, n: usize) -> std::result::Result<Recollection, String> {
    match v.get("pick").and_then(Value::as_u64) {
        Some(0) => Ok(Recollection::Neither),
        Some(k) if (k as usize) <= n => Ok(Recollection::Replay(k as usize - 1)),
        _ => Err(format!("`pick` must be an integer from 0 to {n}")),
    }
}

/// The model's pick among `n` APIs (1-based; 0: none): an index, `None` for none.
pub fn parse_pick(v: &Value, n: usize) -> std::result::Result<Option<usize>, String> {
    match v.get("pick").and_then(Value::as_u64) {
        Some(0) => Ok(None),
        Some(k) if (k as usize) <= n => Ok(Some(k as usize - 1)),
        _ => Err(format!("`pick` must be an integer from 0 to {n}")),
    }
}

/// JSON schema of the answer to "which new mention plays each old mention's part".
pub fn align_schema(unsure: &UnsureMentions) -> Value {
    let n = unsure.old.len();
    json!({
        "type": "object",
        "properties": {"counterparts": {
            "type": "array",
            "items": {"type": "string", "enum": unsure.new},
            "minItems": n,
            "maxItems": n
        }},
        "required": ["counterparts"],
        "additionalProperties": false
    })
}

/// The model's counterparts, as indices into `unsure.new`: one per old mention, each new mention
/// at most once.
pub fn parse_align(v: &Value, unsure: &UnsureMentions) -> std::result::Result<Vec<usize>, String> {
    let got = v.get("counterparts").and_then(Value::as_array).ok_or("`counterparts` must be an array")?;
    if got.len() != unsure.old.len() {
        return Err(format!("`counterparts` must list {} {}s, one per earlier one", unsure.old.len(), unsure.kind));
    }
    let mut map = Vec::new();
    for g in got {
        let said = g.as_str().unwrap_or_default();
        let j = unsure
            .new
            .iter()
            .position(|n| n == said)
            .ok_or_else(|| format!("`{said}` is not one of the new request's {}s", unsure.kind))?;
        if map.contains(&j) {
            return Err(format!("`{said}` is given twice: each new {} plays one part", unsure.kind));
        }
        map.push(j);
    }
    Ok(map)
}

/// JSON schema of a plan.
pub fn plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "solution": {"type": ["integer", "null"]},
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": super::program::MAX_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "api": {"type": "string"},
                        "arguments": {"type": "object"},
                        "for_each": {"type": ["string", "null"]},
                        "if": {"type": ["object", "null"], "properties": {"ref": {"type": "string"}, "op": {"type": "string", "enum": ["exists", "nonempty", "eq", "ne", "gt", "lt"]}, "value": {}}, "required": ["ref", "op"]}
                    },
                    "required": ["api", "arguments"]
                }
            }
        },
        "required": ["steps"]
    })
}

/// JSON schema of a decomposition.
pub fn decompose_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "subtasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "category": {"type": ["string", "null"]}, "request": {"type": "string"}},
                    "required": ["name", "description", "category", "request"]
                }
            }
        },
        "required": ["subtasks"]
    })
}

/// Check a decomposition: 1 to 5 subtasks, each with a name and a non-empty rewritten request.
pub fn parse_subtasks(v: &Value) -> std::result::Result<Vec<Subtask>, String> {
    let items = v.get("subtasks").and_then(Value::as_array).ok_or("`subtasks` must be a list")?;
    if items.is_empty() || items.len() > 5 {
        return Err(format!("need 1 to 5 subtasks, got {}", items.len()));
    }
    let cut = |x: Option<&Value>, n: usize| {
        x.and_then(Value::as_str).map(|s| s.trim().chars().take(n).collect::<String>()).unwrap_or_default()
    };
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        // A bare string is a subtask too (older prompts, small models).
        if let Some(text) = it.as_str() {
            if text.trim().is_empty() {
                return Err(format!("subtask {i} is empty"));
            }
            out.push(Subtask::of_text(i, text.trim()));
            continue;
        }
        let request = cut(it.get("request"), 500);
        if request.is_empty() {
            return Err(format!("subtask {i} has no `request`"));
        }
        let name = cut(it.get("name"), 80);
        out.push(Subtask {
            name: if name.is_empty() { format!("subtask {}", i + 1) } else { name },
            description: cut(it.get("description"), 300),
            category: Some(cut(it.get("category"), 80)).filter(|c| !c.is_empty()),
            request,
        });
    }
    Ok(out)
}

/// JSON schema of a choice.
pub fn choose_schema(n: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["call", "finish", "backtrack", "give_up"]},
            "index": {"type": "integer", "minimum": 0, "maximum": n.saturating_sub(1)},
            "reason": {"type": "string"}
        },
        "required": ["action", "index", "reason"],
        "additionalProperties": false
    })
}

/// JSON schema of an API's arguments: declared types, or a string (a `$label.path$` reference).
pub fn arguments_schema(api: &ApiView) -> Value {
    let props: Map<String, Value> = api
        .params
        .iter()
        .map(|p| {
            let t = match crate::exec::kind(&p.ty) {
                "object" => "string",
                k => k,
            };
            let schema = if t == "string" { json!({"type": "string"}) } else { json!({"type": [t, "string"]}) };
            (p.name.clone(), schema)
        })
        .collect();
    json!({"type": "object", "properties": props, "additionalProperties": false})
}

/// JSON schema of a fill: the arguments with values, the parameters that come from another API's
/// output (Reverse Chain), and those only the user can give.
pub fn fill_schema(api: &ApiView) -> Value {
    json!({
        "type": "object",
        "properties": {
            "arguments": arguments_schema(api),
            "from_api": {"type": "array", "items": {"type": "object", "properties": {"param": {"type": "string"}, "api": {"type": "string"}, "field": {"type": "string"}}, "required": ["param", "api", "field"]}},
            "ask_user": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["arguments", "from_api", "ask_user"]
    })
}

/// The JSON schema of a judgement.
pub fn judge_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pass": {"type": "boolean"},
            "grade": {"type": "number", "minimum": 0, "maximum": 1},
            "first_bad_step": {"type": ["integer", "null"]},
            "irrelevant_tools": {"type": "array", "items": {"type": "string"}},
            "missing": {"type": "array", "items": {"type": "string"}},
            "scores": {"type": "array", "items": {"type": "object", "properties": {"api": {"type": "string"}, "delta": {"type": "number", "minimum": -3, "maximum": 3}}, "required": ["api", "delta"]}},
            "reason": {"type": "string"}
        },
        "required": ["pass", "grade", "first_bad_step", "irrelevant_tools", "missing", "scores", "reason"]
    })
}

/// Check a choice against the candidates offered.
pub fn parse_choice(v: &Value, candidates: &[Candidate]) -> std::result::Result<Decision, String> {
    let action = v.get("action").and_then(Value::as_str).ok_or("`action` is missing")?;
    let reason = v.get("reason").and_then(Value::as_str).unwrap_or_default().chars().take(500).collect::<String>();
    match action {
        "call" => {
            let index =
                v.get("index").and_then(Value::as_u64).ok_or("`index` must be a non-negative integer")? as usize;
            if index >= candidates.len() {
                return Err(format!("index {index} is not one of the {} candidates", candidates.len()));
            }
            Ok(Decision::Call { index, reason })
        }
        "finish" => Ok(Decision::Finish { reason }),
        "backtrack" => Ok(Decision::Backtrack { reason }),
        "give_up" => Ok(Decision::GiveUp { reason }),
        other => Err(format!("unknown action `{other}`")),
    }
}

/// Check a fill: only known parameters; every required one has a value, a provider among those
/// offered for it, or is asked of the user; references name earlier steps; no identifier is
/// invented (an id-like value must appear in the request, the user's values or an earlier output).
pub fn parse_fill(v: &Value, api: &ApiView, ctx: &Context, offers: &[Offer]) -> std::result::Result<Filled, String> {
    let m = v.get("arguments").and_then(Value::as_object).ok_or("`arguments` must be a JSON object")?;
    let known: HashSet<&str> = api.params.iter().map(|p| p.name.as_str()).collect();
    let mut problems = Vec::new();
    for k in m.keys() {
        if !known.contains(k.as_str()) {
            problems.push(format!("`{k}` is not a parameter of {}", api.name));
        }
    }
    let labels: HashSet<&str> = ctx.path.iter().map(|s| s.label.as_str()).collect();
    let mut f = Filled::default();
    for (k, val) in m.iter().filter(|(_, v)| !v.is_null()) {
        if let Some(t) = val.as_str() {
            for r in crate::exec::refs::Reference::all_in(t) {
                let l = r.label.as_str();
                if !labels.contains(l) {
                    problems.push(format!("`{k}` references `{l}`, which is no earlier output"));
                }
            }
        }
        if let Some(why) = super::program::invented_id(ctx, k, val) {
            problems.push(why);
        }
        f.arguments.insert(k.clone(), val.clone());
    }
    for p in v.get("from_api").and_then(Value::as_array).into_iter().flatten() {
        let param = p.get("param").and_then(Value::as_str).unwrap_or_default();
        let name = p.get("api").and_then(Value::as_str).unwrap_or_default();
        let field = p.get("field").and_then(Value::as_str).unwrap_or_default();
        if f.arguments.contains_key(param) {
            continue;
        }
        let offered = offers
            .iter()
            .find(|o| o.param == param)
            .and_then(|o| o.providers.iter().find(|a| a.name == name || a.id == name));
        match offered {
            Some(a) => f.from_api.push(ProviderPick {
                param: param.to_string(),
                api: a.id.clone(),
                field: field.chars().take(200).collect(),
            }),
            None => problems.push(format!("`{name}` is not an API offered for `{param}`")),
        }
    }
    for p in v.get("ask_user").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if known.contains(p) && !f.arguments.contains_key(p) && !f.from_api.iter().any(|x| x.param == p) {
            f.ask_user.push(p.to_string());
        }
    }
    for p in api.params.iter().filter(|p| p.required) {
        let answered = f.arguments.contains_key(&p.name)
            || f.from_api.iter().any(|x| x.param == p.name)
            || f.ask_user.contains(&p.name);
        if !answered {
            problems.push(format!("required `{}` has no value, no provider and is not asked of the user", p.name));
        } else if !f.arguments.contains_key(&p.name) {
            f.missing.push(p.name.clone());
        }
    }
    if problems.is_empty() {
        Ok(f)
    } else {
        Err(problems.join("; "))
    }
}

/// Check a judgement against the path.
pub fn parse_judgement(v: &Value, ctx: &Context) -> std::result::Result<Judgement, String> {
    let pass = v.get("pass").and_then(Value::as_bool).ok_or("`pass` must be a boolean")?;
    let grade = v.get("grade").and_then(Value::as_f64).ok_or("`grade` must be a number")?;
    if !(0.0..=1.0).contains(&grade) {
        return Err(format!("grade {grade} is outside [0, 1]"));
    }
    let first_bad_step = match v.get("first_bad_step") {
        None | Some(Value::Null) => None,
        Some(x) => {
            let i = x.as_u64().ok_or("`first_bad_step` must be an integer or null")? as usize;
            if i >= ctx.path.len() {
                return Err(format!("first_bad_step {i} is past the {} steps", ctx.path.len()));
            }
            Some(i)
        }
    };
    let tools: HashSet<&str> = ctx.path.iter().map(|s| s.api.tool.as_str()).collect();
    let irrelevant: Vec<String> = v
        .get("irrelevant_tools")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if let Some(t) = irrelevant.iter().find(|t| !tools.contains(t.as_str())) {
        return Err(format!("irrelevant tool `{t}` was not called"));
    }
    let mut deltas = Vec::new();
    for s in v.get("scores").and_then(Value::as_array).into_iter().flatten() {
        let name = s.get("api").and_then(Value::as_str).ok_or("each score needs `api`")?;
        let delta = s.get("delta").and_then(Value::as_f64).ok_or("each score needs a numeric `delta`")?;
        if !(-3.0..=3.0).contains(&delta) {
            return Err(format!("delta {delta} for `{name}` is outside [-3, 3]"));
        }
        let step = ctx
            .path
            .iter()
            .find(|st| st.api.name == name || st.api.id == name)
            .ok_or_else(|| format!("scored API `{name}` was not called"))?;
        deltas.push((step.api.id.clone(), delta));
    }
    // Parts of the request the model says no call served; the deterministic coverage checks join
    // them, and the path passes only when both find nothing missing.
    let mut coverage: Vec<crate::read::coverage::Requirement> = v
        .get("missing")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
        .take(10)
        .map(|m| crate::read::coverage::Requirement {
            kind: crate::read::coverage::Kind::Judged,
            value: m.chars().take(200).collect(),
            covered_by: None,
        })
        .collect();
    coverage.extend(crate::read::coverage::assess(ctx));
    let pass = pass && crate::read::coverage::complete(&coverage);
    Ok(Judgement {
        pass,
        grade,
        first_bad_step,
        irrelevant_tools: irrelevant,
        deltas,
        reason: v.get("reason").and_then(Value::as_str).unwrap_or_default().chars().take(500).collect(),
        coverage,
    })
}
