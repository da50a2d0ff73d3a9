//! The gold of a ComplexFuncBench chain: its request and calls with references resolved, and the
//! recordings the replay sandbox serves for it.

use serde_json::{Map, Value};
use std::collections::HashMap;
use toolgraph_engine::exec::refs;
use toolgraph_engine::run::RunReport;
use toolgraph_ingest::complexfuncbench::{Chain, Spec};
use toolgraph_sandbox::{normalize, Recording};

/// A gold call: name, arguments with references, arguments resolved.
pub struct GoldCall {
    pub name: String,
    /// Its label (`var1`), which later calls' references name.
    pub label: Option<String>,
    pub arguments: Map<String, Value>,
    pub resolved: Map<String, Value>,
    /// The recorded response (what a correct call gets).
    pub response: Option<Value>,
}

pub struct Gold {
    pub request: String,
    pub calls: Vec<GoldCall>,
}

/// A chain's request and calls, references resolved against its recorded outputs.
pub fn gold_of(chain: &Chain) -> Result<Gold, String> {
    let mut outputs: HashMap<String, Value> = HashMap::new();
    let mut calls = Vec::new();
    for (i, c) in chain.output.iter().enumerate() {
        let args = c.arguments.as_object().cloned().unwrap_or_default();
        let resolved = refs::resolve(&args, &outputs).map_err(|e| format!("output[{i}]: {e}"))?;
        if let (Some(l), Some(r)) = (&c.label, &c.response) {
            outputs.insert(l.clone(), r.clone());
        }
        calls.push(GoldCall {
            name: c.name.clone(),
            label: c.label.clone(),
            arguments: args,
            resolved,
            response: c.response.clone(),
        });
    }
    Ok(Gold { request: chain.input.trim().to_string(), calls })
}

/// The chains' recorded calls for the sandbox (references resolved against the chain's outputs).
pub fn recordings(chains: &[Chain], specs: &[Spec]) -> (Vec<Recording>, Vec<String>) {
    let by_name: HashMap<&str, &Spec> = specs.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (ci, chain) in chains.iter().enumerate() {
        let mut outputs: HashMap<String, Value> = HashMap::new();
        for (i, c) in chain.output.iter().enumerate() {
            let Some(spec) = by_name.get(c.name.as_str()) else {
                errors.push(format!("chain {ci} output[{i}]: API `{}` is not in the spec", c.name));
                continue;
            };
            let args = c.arguments.as_object().cloned().unwrap_or_default();
            match refs::resolve(&args, &outputs) {
                Ok(resolved) => {
                    if let Some(r) = &c.response {
                        out.push(Recording {
                            api: c.name.clone(),
                            route: format!("{}{}", spec.host, spec.endpoint),
                            required: spec
                                .query_parameters
                                .iter()
                                .filter(|(_, p)| p.required)
                                .map(|(n, _)| n.clone())
                                .collect(),
                            arguments: resolved,
                            response: r.clone(),
                        });
                    }
                }
                Err(e) => errors.push(format!("chain {ci} output[{i}]: {e}")),
            }
            if let (Some(l), Some(r)) = (&c.label, &c.response) {
                outputs.insert(l.clone(), r.clone());
            }
        }
    }
    (out, errors)
}

/// The benchmark's success: the final gold call made with the gold arguments.
pub fn succeeded(gold: &Gold, run: &RunReport) -> bool {
    gold.calls.last().is_some_and(|last| {
        run.chain.iter().any(|c| {
            c.name == last.name && {
                let (s, t) = args_equal(&last.resolved, &c.sent);
                s == t
            }
        })
    })
}

/// How many of the gold arguments were sent with equal values (normalized), of how many.
pub fn args_equal(gold: &Map<String, Value>, sent: &Map<String, Value>) -> (usize, usize) {
    let same = gold.iter().filter(|(k, v)| sent.get(*k).is_some_and(|s| normalize(s) == normalize(v))).count();
    (same, gold.len())
}
