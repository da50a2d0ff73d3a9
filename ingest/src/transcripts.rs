//! OpenAI-style chat transcripts as trajectories: one conversation a JSONL line, as agents built
//! on the OpenAI, Anthropic or MCP SDKs log them —
//! ```json
//! {"messages": [{"role": "user", "content": "weather in Paris tomorrow?"},
//!               {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
//!                 "function": {"name": "weather__forecast", "arguments": "{\"city\": \"Paris\"}"}}]},
//!               {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 12}"},
//!               {"role": "assistant", "content": "12°C."}],
//!  "tools": [{"type": "function", "function": {"name": "weather__forecast", "description": "…",
//!             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
//!  "category": "Weather"}
//! ```
//! The first user turn is the request; the calls and their results follow in order (a result is
//! the `tool` message answering the call's id, or the next unanswered one where calls carry no
//! id; `is_error`/`isError` marks a failed one); the run is answered when the conversation ends
//! with the assistant's words. A function `tool__api` is API `api` of tool `tool` (the last `__`
//! splits; otherwise the function is a tool of its own), filed under the line's `category`
//! (`Unknown` without one); one the tool docs do not hold is documented from the `tools` list.
//! Where an argument is an earlier result's value, the memory records a reference to it
//! (`$var1.path$`) when it remembers the run.

use crate::catalog::{Catalog, Resolution};
use crate::error::RecordError;
use crate::read::content_key;
use crate::report::{call_drop, run_drop};
use crate::runs::{params_of_schema, FunctionCall, FunctionSchema, Sink};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use toolgraph_schema::{ApiDoc, Contribution, Example, ExampleCall, ResolvedCall, UNKNOWN_CATEGORY};

#[derive(Deserialize)]
struct Transcript {
    messages: Vec<ChatMessage>,
    #[serde(default)]
    tools: Vec<ToolDef>,
    #[serde(default)]
    category: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default, alias = "isError")]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct ToolCall {
    #[serde(default)]
    id: Option<String>,
    function: FunctionCall,
}

#[derive(Deserialize)]
struct ToolDef {
    function: FunctionSchema,
}

/// Whether a JSONL record is a chat transcript (it has `messages`) rather than a toolgraph run. A
/// record that is not even JSON is one when it names `messages` and no `request` (so its error
/// is reported as a transcript's, with where the JSON broke).
pub fn is_transcript(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        messages: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_slice::<Probe>(bytes) {
        Ok(p) => p.messages.is_some(),
        Err(_) => {
            let names = |key: &str| {
                let quoted = format!("\"{key}\"");
                let text = String::from_utf8_lossy(bytes);
                text.match_indices(&quoted).any(|(i, _)| text[i + quoted.len()..].trim_start().starts_with(':'))
            };
            names("messages") && !names("request")
        }
    }
}

/// The words of a message's content: a string, or the text parts of a list of parts.
fn text_of(content: &Option<Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The (tool, api) a function name stands for (see the [module](self)).
fn tool_and_api(name: &str) -> (&str, &str) {
    match name.rsplit_once("__") {
        Some((tool, api)) if !tool.is_empty() && !api.is_empty() => (tool, api),
        _ => (name, name),
    }
}

/// One call of the transcript with where it stands and what answered it.
struct Pending<'t> {
    at: String,
    call: &'t ToolCall,
    result: Option<&'t ChatMessage>,
}

/// The calls in order, each with its result message.
fn calls_of(messages: &[ChatMessage]) -> Vec<Pending<'_>> {
    let mut calls: Vec<Pending<'_>> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        match m.role.as_str() {
            "assistant" => {
                for (j, c) in m.tool_calls.iter().flatten().enumerate() {
                    if let Some(id) = c.id.as_deref() {
                        by_id.insert(id, calls.len());
                    }
                    calls.push(Pending { at: format!("messages[{i}].tool_calls[{j}]"), call: c, result: None });
                }
            }
            "tool" | "function" => {
                let slot = match m.tool_call_id.as_deref().and_then(|id| by_id.get(id)) {
                    Some(&k) => Some(k),
                    None => calls.iter().position(|c| c.result.is_none()),
                };
                if let Some(k) = slot.filter(|&k| calls[k].result.is_none()) {
                    calls[k].result = Some(m);
                }
            }
            _ => {}
        }
    }
    calls
}

/// Import one chat transcript (line `line` of `path`); see the [module](self).
pub fn transcript(
    path: &Path,
    line: u64,
    bytes: &[u8],
    catalog: &mut Catalog,
    sink: &mut Sink,
) -> Option<Contribution> {
    sink.tally.runs_read += 1;
    let record = format!("line {line}");
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let t: Transcript = match serde_path_to_error::deserialize(de) {
        Ok(t) => t,
        Err(e) => {
            sink.errors.push(RecordError::from_path_error(path, record, e));
            sink.tally.drop_run(run_drop::PARSE_ERROR);
            return None;
        }
    };
    let Some(request) = t.messages.iter().find(|m| m.role == "user").map(|m| text_of(&m.content)) else {
        sink.errors.push(RecordError::new(path, record, "no user message: nothing asked").with_field("messages"));
        sink.tally.drop_run(run_drop::PARSE_ERROR);
        return None;
    };
    let defs: HashMap<&str, &FunctionSchema> =
        t.tools.iter().map(|d| (d.function.name.as_str(), &d.function)).collect();
    let category = t.category.clone().filter(|c| !c.trim().is_empty());
    let mut contribution = Contribution { key: content_key("chat", bytes), ..Default::default() };
    let mut example = Example { request: request.trim().to_string(), calls: Vec::new() };
    let mut kept: Vec<String> = Vec::new();
    let calls = calls_of(&t.messages);
    for c in &calls {
        let name = c.call.function.name.trim();
        if name.is_empty() {
            sink.errors.push(
                RecordError::new(path, &record, "a call names no function")
                    .with_field(format!("{}.function.name", c.at)),
            );
            sink.tally.attempts_unresolved += 1;
            continue;
        }
        let (tool, api) = tool_and_api(name);
        let id = match catalog.resolve_tool_api(tool, api, category.as_deref()) {
            Resolution::Found(id) => id,
            Resolution::Unknown => catalog.add(ApiDoc {
                category: category.clone().unwrap_or_else(|| UNKNOWN_CATEGORY.to_string()),
                tool: tool.to_string(),
                api: api.to_string(),
                tool_description: String::new(),
                description: defs.get(name).and_then(|d| d.description.clone()).unwrap_or_default(),
                method: String::new(),
                url: String::new(),
                params: defs.get(name).and_then(|d| d.parameters.as_ref()).map(params_of_schema).unwrap_or_default(),
                output_fields: vec![],
            }),
            Resolution::Ambiguous(ids) => {
                let msg = format!("`{name}` matches several APIs ({}); give the line a category", ids.join(", "));
                sink.errors.push(RecordError::new(path, &record, msg).with_field(format!("{}.function.name", c.at)));
                sink.tally.attempts_unresolved += 1;
                continue;
            }
        };
        let arguments = match &c.call.function.arguments {
            None | Some(Value::Null) => Ok(serde_json::Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(serde_json::Map::new()),
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Err("the arguments are not a JSON object".to_string()),
                Err(e) => Err(format!("the arguments are not JSON: {e}")),
            },
            Some(_) => Err("the arguments are neither a JSON text nor an object".to_string()),
        };
        let answered = c.result.is_some_and(|r| r.is_error != Some(true));
        contribution.attempts.push(ResolvedCall { api_id: id.clone(), ok: answered && arguments.is_ok() });
        sink.tally.attempts_counted += 1;
        match (arguments, c.result) {
            (Err(why), _) => {
                sink.errors
                    .push(RecordError::new(path, &record, why).with_field(format!("{}.function.arguments", c.at)));
                sink.tally.drop_calls(call_drop::FAILED, 1);
            }
            (Ok(_), None) => sink.tally.drop_calls(call_drop::FAILED, 1),
            (Ok(_), Some(r)) if r.is_error == Some(true) => sink.tally.drop_calls(call_drop::FAILED, 1),
            (Ok(arguments), Some(r)) => {
                let text = text_of(&r.content);
                let response = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
                example.calls.push(ExampleCall {
                    api_id: id.clone(),
                    label: None,
                    arguments,
                    response: Some(response),
                });
                kept.push(id);
            }
        }
    }
    let last = t.messages.last();
    let answered = last.is_some_and(|m| {
        m.role == "assistant"
            && m.tool_calls.as_ref().is_none_or(Vec::is_empty)
            && !text_of(&m.content).trim().is_empty()
    });
    if !answered {
        sink.tally.drop_run(run_drop::NOT_ANSWERED);
        sink.tally.drop_calls(call_drop::ON_DROPPED_RUN, kept.len() as u64);
        return Some(contribution);
    }
    if kept.is_empty() {
        sink.tally.drop_run(run_drop::NO_SUCCESSFUL_CALLS);
        return Some(contribution);
    }
    sink.tally.calls_kept += kept.len() as u64;
    sink.tally.runs_kept += 1;
    contribution.chain = kept;
    if !example.request.is_empty() {
        contribution.example = Some(example);
    }
    Some(contribution)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Tally;

    fn read(line: &str, catalog: &mut Catalog) -> (Option<Contribution>, Tally, Vec<RecordError>) {
        let mut tally = Tally::default();
        let mut errors = Vec::new();
        let c = transcript(
            Path::new("chats.jsonl"),
            3,
            line.as_bytes(),
            catalog,
            &mut Sink { tally: &mut tally, errors: &mut errors },
        );
        (c, tally, errors)
    }

    /// A recipe assistant's log: the user's words are the request, the calls with their results
    /// become the chain in order, the functions become documented APIs.
    #[test]
    fn a_transcript_is_a_trajectory() {
        let line = serde_json::json!({
            "category": "Food",
            "messages": [
                {"role": "system", "content": "You help cooks."},
                {"role": "user", "content": [{"type": "text", "text": "Find a vegan lasagna recipe and list its shopping items"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "recipes__search", "arguments": "{\"query\": \"vegan lasagna\"}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "{\"results\": [{\"id\": \"r-881\", \"title\": \"Lentil lasagna\"}]}"},
                {"role": "assistant", "tool_calls": [
                    {"id": "b", "type": "function", "function": {"name": "recipes__ingredients", "arguments": {"recipe_id": "r-881"}}}]},
                {"role": "tool", "tool_call_id": "b", "content": "[\"lentils\", \"lasagna sheets\"]"},
                {"role": "assistant", "content": "Lentil lasagna: buy lentils and lasagna sheets."}
            ],
            "tools": [{"type": "function", "function": {"name": "recipes__search", "description": "Search recipes",
                "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "words"}}, "required": ["query"]}}}]
        })
        .to_string();
        let mut catalog = Catalog::default();
        let (c, tally, errors) = read(&line, &mut catalog);
        assert!(errors.is_empty(), "{errors:?}");
        let c = c.unwrap();
        assert_eq!(c.chain, ["food/recipes/search", "food/recipes/ingredients"]);
        let e = c.example.unwrap();
        assert_eq!(e.request, "Find a vegan lasagna recipe and list its shopping items");
        assert_eq!(e.calls[1].arguments["recipe_id"], "r-881");
        assert_eq!(e.calls[0].response.as_ref().unwrap()["results"][0]["id"], "r-881");
        assert_eq!((tally.runs_kept, tally.calls_kept), (1, 2));
        let search = catalog.get("food/recipes/search").unwrap();
        assert_eq!((search.params[0].name.as_str(), search.params[0].required), ("query", true));
        assert_eq!(search.description, "Search recipes");
    }

    /// A call whose result is an error, or whose arguments are not JSON, is not on the chain; a
    /// conversation that never answers feeds no chain; a line without a user turn is refused
    /// with where it is.
    #[test]
    fn failed_calls_and_unanswered_conversations_are_dropped() {
        let mut catalog = Catalog::default();
        let failed = serde_json::json!({"messages": [
            {"role": "user", "content": "Check the stock of SKU 1143"},
            {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "stock", "arguments": "{sku: 1143"}}]},
            {"role": "tool", "tool_call_id": "x", "content": "bad request"},
            {"role": "assistant", "tool_calls": [{"id": "y", "function": {"name": "stock", "arguments": "{\"sku\": 1143}"}}]},
            {"role": "tool", "tool_call_id": "y", "content": "timeout", "isError": true},
            {"role": "assistant", "tool_calls": [{"id": "z", "function": {"name": "stock", "arguments": "{\"sku\": 1143}"}}]},
            {"role": "tool", "tool_call_id": "z", "content": "{\"in_stock\": 4}"},
            {"role": "assistant", "content": "4 in stock."}
        ]})
        .to_string();
        let (c, tally, errors) = read(&failed, &mut catalog);
        let c = c.unwrap();
        assert_eq!(c.attempts.iter().map(|a| a.ok).collect::<Vec<_>>(), [false, false, true]);
        assert_eq!(c.chain, ["unknown/stock/stock"]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field.as_deref(), Some("messages[1].tool_calls[0].function.arguments"));
        assert_eq!(tally.calls_dropped[call_drop::FAILED], 2);

        let unanswered = serde_json::json!({"messages": [
            {"role": "user", "content": "Check the stock of SKU 77"},
            {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "stock", "arguments": "{\"sku\": 77}"}}]},
            {"role": "tool", "tool_call_id": "x", "content": "{\"in_stock\": 0}"}
        ]})
        .to_string();
        let (c, tally, _) = read(&unanswered, &mut catalog);
        assert!(c.unwrap().chain.is_empty());
        assert_eq!(tally.runs_dropped[run_drop::NOT_ANSWERED], 1);

        let (c, _, errors) = read(r#"{"messages": [{"role": "assistant", "content": "hi"}]}"#, &mut catalog);
        assert!(c.is_none());
        assert!(
            errors[0].to_string().contains("line 3") && errors[0].to_string().contains("no user message"),
            "{}",
            errors[0]
        );
        assert!(is_transcript(br#"{"messages": []}"#) && !is_transcript(br#"{"request": "x", "calls": []}"#));
        assert!(is_transcript(br#"{"messages": [{"role": "user", "#) && !is_transcript(br#"{"request": "x", "#));
    }
}
