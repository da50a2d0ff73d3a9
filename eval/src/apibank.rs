//! API-Bank (Li et al., 2023, "API-Bank: A Comprehensive Benchmark for Tool-Augmented LLMs"),
//! level-3 (Plan+Retrieve+Call) as in `../shared/data/apibank/level-3.json`: each sample is a
//! requirement and its gold calls with their inputs and recorded outputs. In API-Bank a model finds
//! each API by calling `ToolSearcher`; in toolgraph retrieval does that, so the `ToolSearcher`
//! calls leave the gold chains and the API definitions they returned (with
//! `api_definitions_extracted_from_apis_py.json`) become the API list. k-fold over the samples:
//! the graph learns from the other folds, each held-out requirement is planned and **executed**
//! against the replay sandbox serving the recorded outputs (a call is answered only when it matches
//! a recording).
//!
//! Metrics, level 3:
//! - **API call correctness** (the paper's metric): gold calls that some call of the run matched —
//!   same API with the gold arguments, or the same API returning exactly the gold output (the
//!   paper: "the same database queries or modifications and returns the same results") — each
//!   gold call at most once;
//! - **call-name accuracy**: gold calls whose API the run called (multiset overlap / gold calls);
//! - **argument accuracy**: gold arguments sent with the gold value by the run's call of the
//!   same API;
//! - **chain success**: runs where every gold call was matched.
//!
//! The paper also scores the final reply with ROUGE-L; toolgraph's deterministic planner writes no
//! prose reply, so that is not reported.

use crate::chains::{ChainEvalOptions, ChainReport};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use toolgraph_engine::embed::Embedder;
use toolgraph_ingest::IngestError;
use toolgraph_schema::Settings;

pub const LEVEL3: &str = "level-3.json";
pub const DEFINITIONS: &str = "api_definitions_extracted_from_apis_py.json";
/// The API that finds APIs in API-Bank (retrieval's job in toolgraph).
pub const TOOL_SEARCHER: &str = "ToolSearcher";
const HOST: &str = "apibank.local";

#[derive(Deserialize)]
struct Sample {
    requirement: String,
    apis: Vec<ApiCall>,
}

#[derive(Deserialize)]
struct ApiCall {
    api_name: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    output: Value,
}

/// An API definition (ToolSearcher's output, or the definitions file with `class`).
fn spec_of(d: &Value) -> Option<(String, Value)> {
    let name = d.get("name").or_else(|| d.get("class"))?.as_str()?.to_string();
    let ty = |t: &str| match t {
        "int" => "integer",
        "float" => "number",
        "bool" => "boolean",
        "list" => "array",
        "dict" => "object",
        _ => "string",
    };
    let params: Map<String, Value> = d
        .get("input_parameters")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, p)| (k.clone(), json!({"type": ty(p.get("type").and_then(Value::as_str).unwrap_or("str")), "description": p.get("description").cloned().unwrap_or(json!("")), "required": true}))).collect())
        .unwrap_or_default();
    let outputs = d.get("output_parameters").cloned().unwrap_or(json!({}));
    Some((
        name.clone(),
        json!({"name": name, "description": d.get("description").cloned().unwrap_or(json!("")), "host": HOST, "endpoint": format!("/{name}"), "query_parameters": params, "output_parameters": outputs}),
    ))
}

/// Level 3 as chains (ComplexFuncBench layout) and the API list as specs; samples that cannot be
/// used are named in `skipped`.
pub fn convert(root: &Path, skipped: &mut Vec<String>) -> Result<(Vec<Value>, Vec<Value>), IngestError> {
    let read = |p: &Path| -> Result<Value, IngestError> {
        let text = std::fs::read_to_string(p).map_err(|e| IngestError::Input(format!("{}: {e}", p.display())))?;
        serde_json::from_str(&text).map_err(|e| IngestError::Input(format!("{}: {e}", p.display())))
    };
    let mut specs: BTreeMap<String, Value> = BTreeMap::new();
    if let Some(defs) = read(&root.join(DEFINITIONS))?.as_array() {
        for d in defs {
            if let Some((n, s)) = spec_of(d) {
                specs.insert(n, s);
            }
        }
    }
    let level3 = read(&root.join(LEVEL3))?;
    let items = level3
        .as_array()
        .ok_or_else(|| IngestError::Input(format!("{}: a list of samples expected", root.join(LEVEL3).display())))?;
    let mut chains = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let sample: Sample = match serde_json::from_value(item.clone()) {
            Ok(s) => s,
            Err(e) => {
                skipped.push(format!("{LEVEL3}[{i}]: {e}"));
                continue;
            }
        };
        let mut output = Vec::new();
        for a in &sample.apis {
            let result = a.output.get("output").cloned().unwrap_or(Value::Null);
            if a.api_name == TOOL_SEARCHER {
                // What the search found is the API's definition (the most complete one wins).
                if let Some((n, s)) = spec_of(&result) {
                    specs.entry(n).or_insert(s);
                }
                continue;
            }
            let exception = a.output.get("exception").filter(|e| !e.is_null()).cloned();
            let mut call = json!({"name": a.api_name, "arguments": a.input, "label": format!("var{}", output.len() + 1), "response": result});
            if let Some(e) = exception {
                call["errors"] = json!([e]);
            }
            output.push(call);
        }
        if output.is_empty() {
            skipped.push(format!("{LEVEL3}[{i}]: no call besides {TOOL_SEARCHER}"));
            continue;
        }
        chains.push(json!({"input": sample.requirement.trim(), "output": output}));
    }
    // Samples calling an API nobody defined cannot be planned.
    chains.retain(|c| {
        match c["output"]
            .as_array()
            .and_then(|o| o.iter().find(|x| !specs.contains_key(x["name"].as_str().unwrap_or_default())))
        {
            Some(x) => {
                skipped.push(format!("{LEVEL3}: `{}` has no definition", x["name"]));
                false
            }
            None => true,
        }
    });
    Ok((chains, specs.into_values().collect()))
}

/// Run level 3 (k-fold, executed against the replay sandbox) and return the chain report.
pub async fn run(
    root: &Path,
    mut opts: ChainEvalOptions,
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    progress: impl FnMut(usize, usize),
) -> Result<ChainReport, IngestError> {
    let mut skipped = Vec::new();
    let (chains, specs) = convert(root, &mut skipped)?;
    let dir = tempfile::tempdir().map_err(|e| IngestError::Input(format!("cannot create a temporary folder: {e}")))?;
    let write = |name: &str, v: &Vec<Value>| -> Result<std::path::PathBuf, IngestError> {
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec(v).unwrap_or_default())
            .map_err(|e| IngestError::Input(format!("{}: {e}", p.display())))?;
        Ok(p)
    };
    opts.train = write("chains.json", &chains)?;
    opts.spec = write("spec.json", &specs)?;
    opts.test = None;
    opts.category = "API-Bank".into();
    let mut r = crate::chains::run(&opts, settings, embedder, progress).await?;
    skipped.append(&mut r.skipped);
    r.skipped = skipped;
    Ok(r)
}

/// Level 3's table: toolgraph's rows.
pub fn markdown(r: &ChainReport) -> String {
    let mut s = format!(
        "## API-Bank level-3 (Plan+Retrieve+Call; {} samples, {}-fold, executed against the recorded outputs; retrieval instead of ToolSearcher)\n\n| method | API call correctness | call-name accuracy | argument accuracy | chain success |\n|---|---:|---:|---:|---:|\n",
        r.test_chains, r.folds
    );
    for m in &r.methods {
        s.push_str(&format!(
            "| **toolgraph `{}`** | **{:.2}** | {:.2} | {:.2} | {:.2} |\n",
            m.method,
            100.0 * m.call_correctness,
            100.0 * m.call_recall,
            100.0 * m.argument_accuracy,
            100.0 * m.all_calls_correct
        ));
    }
    s.push_str(&crate::report::skipped_md("sample", &r.skipped));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_searcher_calls_become_the_api_list_and_leave_the_chains() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DEFINITIONS), r#"[{"class": "AddAlarm", "description": "Set an alarm.", "input_parameters": {"time": {"type": "str", "description": "time"}}, "output_parameters": {"status": {"type": "str"}}}]"#).unwrap();
        let level3 = json!([
            {"requirement": " Query meeting of Tom", "response": "…", "apis": [
                {"api_name": "ToolSearcher", "input": {"keywords": "QueryMeeting"}, "output": {"output": {"name": "QueryMeeting", "description": "Meetings of a user.", "input_parameters": {"user_name": {"type": "str", "description": "Name"}, "limit": {"type": "int", "description": "at most"}}, "output_parameters": {"meetings": {"type": "list"}}}, "exception": null}},
                {"api_name": "QueryMeeting", "input": {"user_name": "Tom", "limit": 2}, "output": {"output": {"meetings": [{"meeting_id": 1}]}, "exception": null}}
            ]},
            {"requirement": "Only a search", "apis": [{"api_name": "ToolSearcher", "input": {}, "output": {"output": {}}}]},
            {"requirement": "Unknown", "apis": [{"api_name": "Nope", "input": {}, "output": {"output": "x"}}]},
            {"apis": []}
        ]);
        std::fs::write(dir.path().join(LEVEL3), level3.to_string()).unwrap();
        let mut skipped = Vec::new();
        let (chains, specs) = convert(dir.path(), &mut skipped).unwrap();
        assert_eq!(
            chains,
            vec![
                json!({"input": "Query meeting of Tom", "output": [{"name": "QueryMeeting", "arguments": {"user_name": "Tom", "limit": 2}, "label": "var1", "response": {"meetings": [{"meeting_id": 1}]}}]})
            ]
        );
        let names: Vec<&str> = specs.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["AddAlarm", "QueryMeeting"]);
        assert_eq!(specs[1]["query_parameters"]["limit"]["type"], "integer");
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(skipped.iter().any(|s| s.contains("[3]") && s.contains("requirement")), "{skipped:?}");
        assert!(skipped.iter().any(|s| s.contains("Nope")), "{skipped:?}");
    }
}
