//! Converter: ComplexFuncBench (NESTFUL format) chains and API specs → toolgraph's JSONL runs and a
//! `tools.jsonl` of the APIs (RapidAPI layout), so they ingest like any user's logs.

use crate::error::RecordError;
use crate::read;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use toolgraph_schema::{CallStatus, Outcome, RecordedCall, RecordedRun};

#[derive(Deserialize)]
pub struct Spec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub endpoint: String,
    #[serde(default)]
    pub query_parameters: BTreeMap<String, SpecParam>,
    #[serde(default)]
    pub output_parameters: Map<String, Value>,
}

#[derive(Deserialize)]
pub struct SpecParam {
    #[serde(default, rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub default: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Chain {
    pub input: String,
    pub output: Vec<ChainCall>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChainCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub errors: Vec<Value>,
    #[serde(default)]
    pub response: Option<Value>,
}

/// The tool name of a RapidAPI host: `booking-com15.p.rapidapi.com` → `booking-com15`.
pub fn tool_of_host(host: &str) -> String {
    host.split('.').next().unwrap_or(host).to_string()
}

pub fn read_specs(path: &Path, max: u64) -> Result<Vec<Spec>, RecordError> {
    let bytes = read::read_document(path, max)?;
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(de).map_err(|e| RecordError::from_path_error(path, "file", e))
}

pub fn read_chains(path: &Path, max: u64) -> Result<Vec<Chain>, RecordError> {
    let bytes = read::read_document(path, max)?;
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(de).map_err(|e| RecordError::from_path_error(path, "file", e))
}

/// The specs as RapidAPI tool lines (one per host).
pub fn tools_lines(specs: &[Spec], category: &str) -> Vec<Value> {
    let mut by_host: BTreeMap<&str, Vec<&Spec>> = BTreeMap::new();
    for s in specs {
        by_host.entry(s.host.as_str()).or_default().push(s);
    }
    by_host
        .into_iter()
        .map(|(host, specs)| {
            let api_list: Vec<Value> = specs
                .iter()
                .map(|s| {
                    let param = |(n, p): (&String, &SpecParam)| {
                        json!({"name": n, "type": p.ty, "description": p.description, "default": p.default})
                    };
                    json!({
                        "name": s.name,
                        "url": format!("https://{}{}", s.host, s.endpoint),
                        "method": "GET",
                        "description": s.description,
                        "required_parameters": s.query_parameters.iter().filter(|(_, p)| p.required).map(param).collect::<Vec<_>>(),
                        "optional_parameters": s.query_parameters.iter().filter(|(_, p)| !p.required).map(param).collect::<Vec<_>>(),
                        "schema": {"type": "object", "properties": s.output_parameters},
                    })
                })
                .collect();
            json!({"tool_name": tool_of_host(host), "tool_description": "", "category": category, "host": host, "api_list": api_list})
        })
        .collect()
}

/// One chain as a JSONL run; calls to APIs the specs lack are an error naming the chain.
pub fn run_of_chain(
    index: usize,
    chain: &Chain,
    tools: &BTreeMap<String, String>,
    category: &str,
) -> Result<RecordedRun, String> {
    let mut calls = Vec::with_capacity(chain.output.len());
    for (i, c) in chain.output.iter().enumerate() {
        let tool = tools.get(&c.name).ok_or_else(|| format!("output[{i}]: API `{}` is not in the spec", c.name))?;
        let failed = !c.errors.is_empty();
        calls.push(RecordedCall {
            tool: tool.clone(),
            api: c.name.clone(),
            category: Some(category.to_string()),
            arguments: c.arguments.clone(),
            status: if failed { CallStatus::Error } else { CallStatus::Ok },
            error: failed.then(|| Value::Array(c.errors.clone()).to_string()),
            response: c.response.clone(),
            label: c.label.clone(),
        });
    }
    Ok(RecordedRun {
        id: Some(format!("complexfuncbench-{index}")),
        request: chain.input.trim().to_string(),
        calls,
        outcome: Outcome::Answered,
        answer: None,
    })
}

/// What a conversion wrote.
#[derive(Debug, Default, serde::Serialize)]
pub struct Converted {
    pub runs: u64,
    pub tools: u64,
    pub apis: u64,
    pub errors: Vec<String>,
}

/// Convert `data` + `spec` into `runs_out` (JSONL runs) and `tools_out` (tools JSONL).
pub fn convert(
    data: &Path,
    spec: &Path,
    runs_out: &Path,
    tools_out: &Path,
    category: &str,
) -> Result<Converted, RecordError> {
    let max = 1 << 30;
    let specs = read_specs(spec, max)?;
    let chains = read_chains(data, max)?;
    let mut out = Converted::default();
    let io = |p: &Path, e: std::io::Error| RecordError::new(p, "file", format!("cannot write: {e}"));
    let mut tw = std::io::BufWriter::new(std::fs::File::create(tools_out).map_err(|e| io(tools_out, e))?);
    for line in tools_lines(&specs, category) {
        out.apis += line["api_list"].as_array().map(Vec::len).unwrap_or(0) as u64;
        writeln!(tw, "{line}").map_err(|e| io(tools_out, e))?;
        out.tools += 1;
    }
    tw.flush().map_err(|e| io(tools_out, e))?;
    let tools: BTreeMap<String, String> = specs.iter().map(|s| (s.name.clone(), tool_of_host(&s.host))).collect();
    let mut rw = std::io::BufWriter::new(std::fs::File::create(runs_out).map_err(|e| io(runs_out, e))?);
    for (i, chain) in chains.iter().enumerate() {
        match run_of_chain(i, chain, &tools, category) {
            Ok(run) => {
                let line = serde_json::to_string(&run).map_err(|e| RecordError::new(runs_out, "file", e))?;
                writeln!(rw, "{line}").map_err(|e| io(runs_out, e))?;
                out.runs += 1;
            }
            Err(msg) => out.errors.push(format!("{}: chain {i}: {msg}", data.display())),
        }
    }
    rw.flush().map_err(|e| io(runs_out, e))?;
    Ok(out)
}
