#![recursion_limit = "256"]
//! toolgraph's evaluation: `toolgraph eval retrieval` (seed-tool retrieval on ToolBench query
//! files), `toolgraph eval chains` (learn from chains, plan held-out ones against the replay
//! sandbox), and the public benchmarks with their own metrics, next to their published tables.

pub mod apibank;
pub mod chains;
pub mod complexfuncbench;
pub mod direct;
pub mod gold;
pub mod nestful;
pub mod planned;
pub mod predictions;
pub mod report;
pub mod retrieval;
pub mod reworded;
pub mod taskbench;
pub mod toolbench;

/// For whoever traces a request: where `TOOLGRAPH_EVAL_TRACE` is set, every run whose request
/// contains its text writes its trace to stderr (one JSON line per step).
fn trace_if_asked(method: &str, r: &toolgraph_engine::run::RunReport) {
    static PART: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let part = PART.get_or_init(|| std::env::var("TOOLGRAPH_EVAL_TRACE").ok().filter(|p| !p.is_empty()));
    let Some(part) = part else { return };
    if !r.request.contains(part.as_str()) {
        return;
    }
    eprintln!("=== {method}: {} ({:?})", r.request, r.status);
    for e in &r.trace {
        eprintln!("{}", serde_json::to_string(e).unwrap_or_default());
    }
}
