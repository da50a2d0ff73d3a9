//! Trajectory importers: ToolBench answer files and toolgraph's JSONL runs. Each turns one record
//! into a [`Contribution`] (attempts for availability + the cleaned chain) and tallies what it
//! dropped and why.

use crate::catalog::{Catalog, Resolution};
use crate::error::RecordError;
use crate::read::content_key;
use crate::report::{call_drop, run_drop, Tally};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use toolgraph_schema::{
    ApiDoc, CallStatus, Contribution, Example, ExampleCall, Outcome, ParamDoc, RecordedRun, ResolvedCall,
    UNKNOWN_CATEGORY,
};

/// Where resolution problems are written.
pub struct Sink<'a> {
    pub tally: &'a mut Tally,
    pub errors: &'a mut Vec<RecordError>,
}

// ---- ToolBench ----------------------------------------------------------------------------------

#[derive(Deserialize)]
struct Answer {
    answer_generation: AnswerGeneration,
    #[serde(default)]
    tree: Option<TreeWrapper>,
    #[serde(default)]
    trys: Option<Vec<Try>>,
}

#[derive(Deserialize)]
struct AnswerGeneration {
    valid_data: bool,
    /// The user's request (absent in some older files).
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    finish_type: Option<String>,
    #[serde(default)]
    function: Vec<FunctionSchema>,
    #[serde(default)]
    train_messages: Vec<Vec<Message>>,
}

/// A function as a chat log offers it: name, description, JSON-Schema parameters.
#[derive(Deserialize)]
pub(crate) struct FunctionSchema {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: Option<String>,
    #[serde(default)]
    pub(crate) parameters: Option<Value>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

/// A function call as a chat log records it: the name and the arguments (a JSON text, or an
/// object as some loggers write it).
#[derive(Deserialize)]
pub(crate) struct FunctionCall {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) arguments: Option<Value>,
}

#[derive(Deserialize)]
struct TreeWrapper {
    tree: TreeNode,
}

#[derive(Deserialize)]
struct TreeNode {
    #[serde(default)]
    node_type: Option<String>,
    #[serde(default)]
    description: Option<Value>,
    #[serde(default)]
    observation: Option<Value>,
    #[serde(default)]
    observation_code: Option<Value>,
    #[serde(default)]
    children: Vec<TreeNode>,
}

#[derive(Deserialize)]
struct Try {
    #[serde(default)]
    chain: Vec<TreeNode>,
}

const FINISH: &str = "Finish";

fn text(v: &Option<Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn code_of(v: &Option<Value>) -> Option<i64> {
    match v {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The `error` of a ToolBench observation (`{"error": "...", "response": ...}`).
fn observation_error(obs: &str) -> String {
    match serde_json::from_str::<Value>(obs) {
        Ok(Value::Object(m)) => match m.get("error") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        },
        _ => String::new(),
    }
}

/// Arguments in a canonical form, to match path calls with tree nodes.
fn canonical_args(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(v) => v.to_string(),
        Err(_) => raw.trim().to_string(),
    }
}

/// One attempted call found in a tree or a try chain.
struct Attempt {
    name: String,
    args: String,
    code: Option<i64>,
    error: String,
}

fn attempts_of_chain(nodes: &[TreeNode], out: &mut Vec<Attempt>) {
    let mut pending: Option<String> = None;
    for n in nodes {
        match n.node_type.as_deref() {
            Some("Action") => pending = Some(text(&n.description)),
            Some("Action Input") => {
                if let Some(name) = pending.take() {
                    out.push(Attempt {
                        name,
                        args: canonical_args(&text(&n.description)),
                        code: code_of(&n.observation_code),
                        error: observation_error(&text(&n.observation)),
                    });
                }
            }
            _ => {}
        }
    }
}

fn attempts_of_tree(root: &TreeNode, out: &mut Vec<Attempt>) {
    // Iterative walk: an Action node's Action Input children are its attempts.
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.node_type.as_deref() == Some("Action") {
            let name = text(&n.description);
            for c in &n.children {
                if c.node_type.as_deref() == Some("Action Input") {
                    out.push(Attempt {
                        name: name.clone(),
                        args: canonical_args(&text(&c.description)),
                        code: code_of(&c.observation_code),
                        error: observation_error(&text(&c.observation)),
                    });
                }
            }
        }
        for c in n.children.iter().rev() {
            stack.push(c);
        }
    }
}

/// The standardized tool name in a function description: `This is the subfunction for tool "seo_api"`.
fn schema_tool(desc: &str) -> Option<String> {
    let marker = "subfunction for tool \"";
    let start = desc.find(marker)? + marker.len();
    let end = desc[start..].find('"')? + start;
    Some(desc[start..end].to_string())
}

fn schema_api_description(desc: &str) -> String {
    let marker = "The description of this function is: \"";
    match desc.find(marker) {
        Some(i) => desc[i + marker.len()..].trim_end().trim_end_matches('"').to_string(),
        None => desc.to_string(),
    }
}

/// The parameters a function's JSON Schema (`{"type": "object", "properties": …, "required": […]}`)
/// declares; a property's `example_value` (ToolBench) or `default` is its default.
pub(crate) fn params_of_schema(schema: &Value) -> Vec<ParamDoc> {
    let Some(p) = schema.as_object() else { return Vec::new() };
    let required: BTreeSet<&str> = p
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = p.get("properties").and_then(Value::as_object) else { return Vec::new() };
    props
        .iter()
        .map(|(pname, spec)| ParamDoc {
            name: pname.clone(),
            ty: spec.get("type").and_then(Value::as_str).unwrap_or_default().to_string(),
            description: spec.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
            required: required.contains(pname.as_str()),
            default: spec.get("example_value").or_else(|| spec.get("default")).cloned().filter(|v| !v.is_null()),
        })
        .collect()
}

/// An API defined only by a trajectory's function schema (its tool is missing from the docs).
fn doc_from_schema(name: &str, schema: &FunctionSchema, catalog: &Catalog) -> Option<ApiDoc> {
    let desc = schema.description.clone().unwrap_or_default();
    let tool = schema_tool(&desc)?;
    let suffix = format!("_for_{tool}");
    let api = name.strip_suffix(&suffix).filter(|a| !a.is_empty()).unwrap_or(name).to_string();
    let category = catalog.category_of_tool(&tool).unwrap_or_else(|| UNKNOWN_CATEGORY.to_string());
    let params = schema.parameters.as_ref().map(params_of_schema).unwrap_or_default();
    Some(ApiDoc {
        category,
        tool,
        api,
        tool_description: String::new(),
        description: schema_api_description(&desc),
        method: String::new(),
        url: String::new(),
        params,
        output_fields: vec![],
    })
}

struct FunctionResolver<'s> {
    tools: BTreeSet<String>,
    schemas: HashMap<&'s str, &'s FunctionSchema>,
}

impl FunctionResolver<'_> {
    /// Resolve through the docs; a name the docs lack but the file's schemas define becomes an API.
    fn resolve(&self, name: &str, catalog: &mut Catalog) -> Resolution {
        match catalog.resolve_function(name, &self.tools) {
            Resolution::Unknown => match self.schemas.get(name).and_then(|s| doc_from_schema(name, s, catalog)) {
                Some(doc) => Resolution::Found(catalog.add(doc)),
                None => Resolution::Unknown,
            },
            other => other,
        }
    }
}

/// A call of the chosen path, with what came back.
struct PathCall {
    name: String,
    args: String,
    error: Option<String>,
    response: Option<String>,
}

/// The calls of the chosen path (the last list of train_messages) and how it finished.
fn chosen_path(path_msgs: &[Message]) -> (Vec<PathCall>, Option<String>) {
    let mut calls: Vec<PathCall> = Vec::new();
    let mut finish: Option<String> = None;
    for m in path_msgs {
        match (m.role.as_str(), &m.function_call) {
            ("assistant", Some(fc)) if fc.name == FINISH => {
                let args = text(&fc.arguments);
                let rt = serde_json::from_str::<Value>(&args)
                    .ok()
                    .and_then(|v| v.get("return_type").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_else(
                        || if args.contains("give_answer") { "give_answer".into() } else { "give_up".into() },
                    );
                finish = Some(rt);
            }
            ("assistant", Some(fc)) => calls.push(PathCall {
                name: fc.name.clone(),
                args: canonical_args(&text(&fc.arguments)),
                error: None,
                response: None,
            }),
            ("function", _) => {
                if let Some(last) = calls.last_mut().filter(|c| c.error.is_none()) {
                    let content = text(&m.content);
                    last.error = Some(observation_error(&content));
                    last.response = Some(content);
                }
            }
            _ => {}
        }
    }
    (calls, finish)
}

/// A path call's status code when no attempt recorded one: 0 without an error, 1 for an unknown
/// function name, else unknown.
fn code_of_error(error: &str) -> Option<i64> {
    if error.is_empty() {
        Some(0)
    } else if error.starts_with("No such function name") {
        Some(1)
    } else {
        None
    }
}

/// Import one ToolBench answer file (DFSDT `tree` or CoT `trys`).
pub fn toolbench_answer(path: &Path, bytes: &[u8], catalog: &mut Catalog, sink: &mut Sink) -> Option<Contribution> {
    sink.tally.runs_read += 1;
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let answer: Answer = match serde_path_to_error::deserialize(de) {
        Ok(a) => a,
        Err(e) => {
            sink.errors.push(RecordError::from_path_error(path, "file", e));
            sink.tally.drop_run(run_drop::PARSE_ERROR);
            return None;
        }
    };
    let ag = &answer.answer_generation;
    let resolver = FunctionResolver {
        tools: ag.function.iter().filter_map(|f| schema_tool(f.description.as_deref().unwrap_or(""))).collect(),
        schemas: ag.function.iter().map(|f| (f.name.as_str(), f)).collect(),
    };
    let mut contribution = Contribution { key: content_key("toolbench", bytes), ..Default::default() };

    // Every attempt on every branch, for availability.
    let mut attempts = Vec::new();
    if let Some(t) = &answer.tree {
        attempts_of_tree(&t.tree, &mut attempts);
    }
    for t in answer.trys.iter().flatten() {
        attempts_of_chain(&t.chain, &mut attempts);
    }
    let mut codes: HashMap<(String, String), i64> = HashMap::new();
    for a in &attempts {
        if let Some(code) = a.code {
            codes.entry((a.name.clone(), a.args.clone())).or_insert(code);
        }
        if a.name == FINISH {
            continue;
        }
        match resolver.resolve(&a.name, catalog) {
            Resolution::Found(id) => {
                let ok = a.code == Some(0) && a.error.is_empty();
                contribution.attempts.push(ResolvedCall { api_id: id, ok });
                sink.tally.attempts_counted += 1;
            }
            _ => sink.tally.attempts_unresolved += 1,
        }
    }

    // The chosen path: the last list of train_messages.
    let path_msgs: &[Message] = ag.train_messages.last().map(Vec::as_slice).unwrap_or(&[]);
    let (calls, finish) = chosen_path(path_msgs);

    let answered = ag.valid_data && finish.as_deref() == Some("give_answer");
    if !answered {
        let gave_up =
            ag.finish_type.as_deref() == Some("give_up") || finish.as_deref().is_some_and(|f| f.starts_with("give_up"));
        sink.tally.drop_run(if gave_up { run_drop::GAVE_UP } else { run_drop::NOT_ANSWERED });
        sink.tally.drop_calls(call_drop::ON_DROPPED_RUN, calls.len() as u64);
        return Some(contribution);
    }

    let mut example = Example { request: ag.query.clone().unwrap_or_default(), calls: Vec::new() };
    for (i, c) in calls.iter().enumerate() {
        let error = c.error.clone().unwrap_or_default();
        let code = codes.get(&(c.name.clone(), c.args.clone())).copied().or_else(|| code_of_error(&error));
        match code {
            Some(0) if error.is_empty() => {}
            Some(0) | None => {
                sink.tally.drop_calls(call_drop::ERROR_MESSAGE, 1);
                continue;
            }
            Some(code) => {
                sink.tally.drop_calls(call_drop::for_code(code), 1);
                continue;
            }
        }
        match resolver.resolve(&c.name, catalog) {
            Resolution::Found(id) => {
                example.calls.push(ExampleCall {
                    api_id: id.clone(),
                    label: None,
                    arguments: serde_json::from_str(&c.args).unwrap_or_default(),
                    response: c
                        .response
                        .as_deref()
                        .map(|r| serde_json::from_str(r).unwrap_or_else(|_| Value::String(r.to_string()))),
                });
                contribution.chain.push(id);
                sink.tally.calls_kept += 1;
            }
            Resolution::Unknown => {
                sink.tally.drop_calls(call_drop::UNKNOWN_FUNCTION, 1);
                sink.errors.push(
                    RecordError::new(path, format!("path call {i}"), format!("unknown function name `{}`", c.name))
                        .with_field("answer_generation.train_messages"),
                );
            }
            Resolution::Ambiguous(ids) => {
                sink.tally.drop_calls(call_drop::AMBIGUOUS_FUNCTION, 1);
                sink.errors.push(RecordError::new(
                    path,
                    format!("path call {i}"),
                    format!("function name `{}` matches several APIs ({}); skipped", c.name, ids.join(", ")),
                ));
            }
        }
    }
    if contribution.chain.is_empty() {
        sink.tally.drop_run(run_drop::NO_SUCCESSFUL_CALLS);
    } else {
        sink.tally.runs_kept += 1;
        if !example.request.trim().is_empty() {
            contribution.example = Some(example);
        }
    }
    Some(contribution)
}

// ---- toolgraph JSONL ----------------------------------------------------------------------------

/// Import one run of toolgraph's JSONL format (see `toolgraph_schema::trajectory`).
pub fn jsonl_run(path: &Path, line: u64, bytes: &[u8], catalog: &mut Catalog, sink: &mut Sink) -> Option<Contribution> {
    sink.tally.runs_read += 1;
    let record = format!("line {line}");
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let run: RecordedRun = match serde_path_to_error::deserialize(de) {
        Ok(r) => r,
        Err(e) => {
            sink.errors.push(RecordError::from_path_error(path, record, e));
            sink.tally.drop_run(run_drop::PARSE_ERROR);
            return None;
        }
    };
    for (i, c) in run.calls.iter().enumerate() {
        if c.tool.trim().is_empty() || c.api.trim().is_empty() {
            sink.errors.push(
                RecordError::new(path, record.clone(), "tool and api must not be empty")
                    .with_field(format!("calls[{i}]")),
            );
            sink.tally.drop_run(run_drop::PARSE_ERROR);
            return None;
        }
    }
    let mut contribution = Contribution { key: content_key("run", bytes), ..Default::default() };
    let mut resolved: Vec<Option<String>> = Vec::with_capacity(run.calls.len());
    for (i, c) in run.calls.iter().enumerate() {
        let id = match catalog.resolve_tool_api(&c.tool, &c.api, c.category.as_deref()) {
            Resolution::Found(id) => Some(id),
            Resolution::Unknown => Some(catalog.add(ApiDoc {
                category: c.category.clone().unwrap_or_else(|| UNKNOWN_CATEGORY.to_string()),
                tool: c.tool.clone(),
                api: c.api.clone(),
                tool_description: String::new(),
                description: String::new(),
                method: String::new(),
                url: String::new(),
                params: vec![],
                output_fields: vec![],
            })),
            Resolution::Ambiguous(ids) => {
                sink.errors.push(
                    RecordError::new(
                        path,
                        record.clone(),
                        format!(
                            "`{}`/`{}` matches several APIs ({}); give its category",
                            c.tool,
                            c.api,
                            ids.join(", ")
                        ),
                    )
                    .with_field(format!("calls[{i}].category")),
                );
                None
            }
        };
        let ok = c.status == CallStatus::Ok && c.error.as_deref().is_none_or(str::is_empty);
        match &id {
            Some(id) => {
                contribution.attempts.push(ResolvedCall { api_id: id.clone(), ok });
                sink.tally.attempts_counted += 1;
            }
            None => sink.tally.attempts_unresolved += 1,
        }
        resolved.push(id);
    }
    if run.outcome != Outcome::Answered {
        sink.tally.drop_run(if run.outcome == Outcome::GaveUp { run_drop::GAVE_UP } else { run_drop::NOT_ANSWERED });
        sink.tally.drop_calls(call_drop::ON_DROPPED_RUN, run.calls.len() as u64);
        return Some(contribution);
    }
    let mut example = Example { request: run.request.clone(), calls: Vec::new() };
    for (c, id) in run.calls.iter().zip(&resolved) {
        let ok = c.status == CallStatus::Ok && c.error.as_deref().is_none_or(str::is_empty);
        match (ok, id) {
            (false, _) => sink.tally.drop_calls(call_drop::FAILED, 1),
            (true, None) => sink.tally.drop_calls(call_drop::AMBIGUOUS_FUNCTION, 1),
            (true, Some(id)) => {
                example.calls.push(ExampleCall {
                    api_id: id.clone(),
                    label: c.label.clone(),
                    arguments: c.arguments.as_object().cloned().unwrap_or_default(),
                    response: c.response.clone(),
                });
                contribution.chain.push(id.clone());
                sink.tally.calls_kept += 1;
            }
        }
    }
    if contribution.chain.is_empty() {
        sink.tally.drop_run(run_drop::NO_SUCCESSFUL_CALLS);
    } else {
        sink.tally.runs_kept += 1;
        if !example.request.trim().is_empty() {
            contribution.example = Some(example);
        }
    }
    Some(contribution)
}
