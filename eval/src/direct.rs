//! `llm-direct`: the model alone, as ComplexFuncBench runs models — every API of the domain in the
//! OpenAI `tools` field, the request as the user's message, and turn by turn each tool call the
//! model makes is executed (against the same replay sandbox the engine's methods call) and its
//! response given back as a `tool` message, until the model answers in text or `max_turns`
//! completions are spent. No graph, no retrieval, no filler: the baseline toolgraph's methods
//! must beat with the same model.
//!
//! The run comes back as a [`RunReport`] (the chain of successful calls, a trace of every call
//! sent with its response or failure, the model's usage), so the evaluation scores it with the
//! same metrics as the engine's runs. `answered` is the model ending with a text answer (the
//! paper asks GPT-4o whether that answer is complete; no such judge here).

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use toolgraph_engine::exec::{compress, keep_set, kind, CallSpec, Executor};
use toolgraph_engine::plan::llm::LlmPlanner;
use toolgraph_engine::run::TraceEvent;
use toolgraph_engine::run::{ChainCall, RunStats};
use toolgraph_engine::run::{RunReport, Status};
use toolgraph_schema::{ApiNode, ParamDoc};

/// The system message of every `llm-direct` conversation (fixed: with the tools it forms the
/// prefix a server's prompt cache reuses from one request to the next).
pub const DIRECT_SYSTEM: &str = "You are a helpful assistant with access to functions. Call the functions needed to serve the user's request, passing values from the request and from earlier function results; when the results answer the request, reply with the final answer in text.";

/// Limits of one `llm-direct` conversation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirectOptions {
    /// Completions per request.
    pub max_turns: usize,
    /// Characters of a tool response given back to the model (compressed like the engine's
    /// observations).
    pub observation_chars: usize,
    /// Characters of an API's description in its tool entry.
    pub description_chars: usize,
    /// Characters of a parameter's description.
    pub param_chars: usize,
}

impl Default for DirectOptions {
    fn default() -> Self {
        DirectOptions { max_turns: 8, observation_chars: 1_200, description_chars: 160, param_chars: 100 }
    }
}

/// The APIs as OpenAI `tools` entries: name, description, parameters as a JSON schema (types
/// from the documented ones, required ones listed), in the order given.
pub fn tool_entries(apis: &[&ApiNode], opts: &DirectOptions) -> Vec<Value> {
    apis.iter()
        .map(|a| {
            let params: Vec<ParamDoc> = serde_json::from_str(&a.parameters).unwrap_or_default();
            let props: Map<String, Value> = params
                .iter()
                .map(|p| {
                    let t = kind(&p.ty);
                    let mut schema = json!({"type": t});
                    let d: String = p.description.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(opts.param_chars).collect();
                    if !d.is_empty() {
                        schema["description"] = json!(d);
                    }
                    (p.name.clone(), schema)
                })
                .collect();
            let required: Vec<&str> = params.iter().filter(|p| p.required).map(|p| p.name.as_str()).collect();
            let description: String = a.description.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(opts.description_chars).collect();
            json!({"type": "function", "function": {"name": a.name, "description": description, "parameters": {"type": "object", "properties": props, "required": required}}})
        })
        .collect()
}

/// One request served by the model alone over `tools` (built by [`tool_entries`] from `apis`),
/// every call sent through `exec`.
pub async fn run_direct(
    llm: &LlmPlanner,
    apis: &HashMap<String, &ApiNode>,
    tools: &[Value],
    exec: &Executor,
    request: &str,
    opts: &DirectOptions,
) -> toolgraph_engine::Result<RunReport> {
    let usage: toolgraph_engine::plan::RunUsage = Default::default();
    let mut r =
        toolgraph_engine::plan::RUN_USAGE.scope(usage.clone(), converse(llm, apis, tools, exec, request, opts)).await?;
    r.stats.llm = usage.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(r)
}

async fn converse(
    llm: &LlmPlanner,
    apis: &HashMap<String, &ApiNode>,
    tools: &[Value],
    exec: &Executor,
    request: &str,
    opts: &DirectOptions,
) -> toolgraph_engine::Result<RunReport> {
    let started = Instant::now();
    let mut messages =
        vec![json!({"role": "system", "content": DIRECT_SYSTEM}), json!({"role": "user", "content": request})];
    let mut trace = Vec::new();
    let mut chain = Vec::new();
    let mut responses = Vec::new();
    let mut stats = RunStats::default();
    let mut answer = None;
    let no_outputs: HashMap<String, Value> = HashMap::new();
    // What a compressed response keeps: the request's words (the same for every call).
    let keep = keep_set(request, std::iter::empty::<&str>());
    for _ in 0..opts.max_turns {
        stats.planner_calls += 1;
        let v = llm.chat(json!({"messages": messages, "tools": tools, "tool_choice": "auto"})).await?;
        let message = v.pointer("/choices/0/message").cloned().unwrap_or(Value::Null);
        let mut calls: Vec<Value> = message.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default();
        if calls.is_empty() {
            calls = calls_in_text(message.get("content").and_then(Value::as_str).unwrap_or_default(), messages.len());
        }
        if calls.is_empty() {
            answer = Some(message.get("content").and_then(Value::as_str).unwrap_or_default().to_string());
            break;
        }
        messages.push(json!({"role": "assistant", "content": message.get("content").cloned().unwrap_or(Value::Null), "tool_calls": calls}));
        for (i, call) in calls.iter().enumerate() {
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("call_{}_{i}", messages.len()));
            let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default();
            // Arguments come as a JSON string (an object from some servers).
            let arguments: Option<Map<String, Value>> = match call.pointer("/function/arguments") {
                Some(Value::String(s)) => serde_json::from_str::<Value>(s).ok().and_then(|v| v.as_object().cloned()),
                Some(Value::Object(m)) => Some(m.clone()),
                _ => None,
            };
            let label = format!("var{}", stats.http_calls + stats.failed_calls + 1);
            let content = match (apis.get(name), arguments) {
                (None, _) => format!("error: there is no function named `{name}`"),
                (Some(_), None) => format!("error: the arguments of `{name}` are not a JSON object"),
                (Some(node), Some(args)) => {
                    let spec = CallSpec::from_node(node);
                    trace.push(TraceEvent::Call {
                        label: label.clone(),
                        api: node.id.clone(),
                        arguments: args.clone(),
                        sources: Default::default(),
                    });
                    match exec.call(&spec, &args, &no_outputs).await {
                        Ok(out) => {
                            stats.http_calls += 1;
                            stats.http_ms += out.elapsed_ms;
                            let observation = compress(&out.response, &keep, opts.observation_chars);
                            let response = Arc::new(out.response);
                            trace.push(TraceEvent::Response {
                                label: label.clone(),
                                api: node.id.clone(),
                                status: out.status,
                                attempts: out.attempts,
                                elapsed_ms: out.elapsed_ms,
                                observation: observation.clone(),
                                response: response.clone(),
                                sent: None,
                            });
                            chain.push(ChainCall {
                                label,
                                api: node.id.clone(),
                                name: node.name.clone(),
                                arguments: args,
                                sent: out.arguments,
                                subtask: None,
                            });
                            responses.push(response);
                            observation
                        }
                        Err(e) => {
                            stats.failed_calls += 1;
                            let text = e.to_string();
                            trace.push(TraceEvent::CallFailed {
                                api: node.id.clone(),
                                arguments: args,
                                error: e,
                                sent: None,
                            });
                            format!("error: {}", text.chars().take(300).collect::<String>())
                        }
                    }
                }
            };
            messages.push(json!({"role": "tool", "tool_call_id": id, "name": name, "content": content}));
        }
    }
    stats.engine_ms = started.elapsed().as_secs_f64() * 1000.0 - stats.http_ms;
    let status = match &answer {
        Some(a) if !a.trim().is_empty() => Status::Answered,
        _ if chain.is_empty() => Status::GaveUp,
        _ => Status::Partial,
    };
    Ok(RunReport {
        request: request.to_string(),
        status,
        answer: answer.unwrap_or_default(),
        chain,
        needs_input: None,
        judgement: None,
        trace,
        stats,
        responses,
    })
}

/// Tool calls a model wrote into its text instead of the `tool_calls` field — small models often
/// answer with a JSON object `{"name": …, "arguments": {…}}` (or a list of them), bare, in a
/// ```json block or in `<tool_call>` tags, which the server's template parser does not pick up.
/// They are taken as calls (ids `text_TURN_I`), as a tool-calling harness for such models does.
pub fn calls_in_text(text: &str, turn: usize) -> Vec<Value> {
    let mut found = Vec::new();
    let mut rest = text;
    // Every top-level JSON value in the text, wherever it starts.
    while let Some(start) = rest.find(['{', '[']) {
        let mut it = serde_json::Deserializer::from_str(&rest[start..]).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => {
                let used = it.byte_offset();
                match v {
                    Value::Array(items) => found.extend(items),
                    other => found.push(other),
                }
                rest = &rest[start + used..];
            }
            _ => rest = &rest[start + 1..],
        }
    }
    found
        .into_iter()
        .filter_map(|v| {
            let name = v.get("name").and_then(Value::as_str)?;
            let args = match v.get("arguments").or_else(|| v.get("parameters")) {
                Some(Value::Object(m)) => Value::Object(m.clone()).to_string(),
                Some(Value::String(s)) => s.clone(),
                None => "{}".to_string(),
                _ => return None,
            };
            Some((name.to_string(), args))
        })
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("text_{turn}_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_written_as_text_are_taken() {
        let text =
            "```json\n{\n  \"name\": \"Search_Car_Location\",\n  \"arguments\": {\"query\": \"Burbank\"}\n}\n```";
        let calls = calls_in_text(text, 3);
        assert_eq!(
            calls,
            vec![
                json!({"id": "text_3_0", "type": "function", "function": {"name": "Search_Car_Location", "arguments": "{\"query\":\"Burbank\"}"}})
            ]
        );
        let two = calls_in_text("<tool_call>\n{\"name\": \"A\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"B\", \"arguments\": \"{}\"}\n</tool_call>", 1);
        assert_eq!(two.iter().map(|c| c["function"]["name"].as_str().unwrap()).collect::<Vec<_>>(), vec!["A", "B"]);
        assert!(calls_in_text("The car costs 25 USD {per day}.", 1).is_empty(), "prose is an answer");
        assert!(calls_in_text("{\"price\": 25}", 1).is_empty(), "JSON that is no call is an answer");
    }
}
