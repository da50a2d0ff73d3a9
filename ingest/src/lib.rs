#![recursion_limit = "256"]
//! toolgraph's importers: tool docs, ToolBench answers and query files, toolgraph's JSONL runs and
//! a ComplexFuncBench converter; cleaning (only successful calls of answered paths feed chains);
//! and the batch pipeline that writes the tool graph into any [`GraphStore`].
//!
//! [`GraphStore`]: toolgraph_engine::GraphStore

pub mod catalog;
pub mod complexfuncbench;
pub mod error;
pub mod feeds;
pub mod pipeline;
pub mod read;
pub mod report;
pub mod runs;
pub mod transcripts;

pub use error::{IngestError, RecordError};
pub use pipeline::{ingest, Inputs, NoProgress, Progress};
pub use report::IngestReport;
