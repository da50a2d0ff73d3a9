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
