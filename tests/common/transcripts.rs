//! Chat transcripts for tests of what ingest teaches: tools and transcripts written as users'
//! files are, ingested with the binary, and asked about as a dry run.

use super::{bin_in, run_ok};
use std::path::Path;

/// Ingest chat transcripts (one JSON line each) from `dir/name` into an embedded store in `dir`;
/// returns the store's URI.
pub fn ingest_transcripts(dir: &Path, name: &str, lines: &[String]) -> String {
    let file = dir.join(name);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let store = format!("embedded:{}", dir.join("g.redb").display());
    run_ok(bin_in(dir).arg("--store").arg(&store).arg("ingest").arg("--trajectories").arg(&file));
    store
}

/// `ask --dry-run --json --no-learn` of `request` over `store`: the run as JSON.
pub fn ask_dry(dir: &Path, store: &str, request: &str) -> serde_json::Value {
    let out = bin_in(dir)
        .arg("--store")
        .arg(store)
        .args(["ask", request, "--dry-run", "--json", "--no-learn"])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

/// A tool declaration of a chat transcript (OpenAI function format).
pub fn function_tool(
    name: &str,
    description: &str,
    props: serde_json::Value,
    required: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({"type": "function", "function": {"name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": required}}})
}

/// A chat transcript (one JSON line): the request, then each (tool, arguments, result) as an
/// assistant's tool call and its answer, then a closing word.
pub fn chat_transcript(
    category: &str,
    tools: &serde_json::Value,
    request: &str,
    calls: &[(&str, serde_json::Value, serde_json::Value)],
) -> String {
    use serde_json::json;
    let mut messages = vec![json!({"role": "user", "content": request})];
    for (n, (name, args, result)) in calls.iter().enumerate() {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{n}"),
            "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{n}"), "content": result.to_string()}));
    }
    messages.push(json!({"role": "assistant", "content": "Done."}));
    json!({"category": category, "messages": messages, "tools": tools}).to_string()
}

/// The trace's recall event of a run (which memory, what its replay left out).
pub fn recall_event(r: &serde_json::Value) -> Option<serde_json::Value> {
    r["trace"].as_array().unwrap().iter().find(|t| t["type"] == "recall").cloned()
}
