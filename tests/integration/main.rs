//! The integration tests in one test binary (one link of the whole workspace instead of one per
//! file). Each module is one area; `common` and `daemon_common` are the helpers they share.
//!
//! Two suites stay binaries of their own because they change process-wide state: `telemetry`
//! (the global tracing subscriber and OpenTelemetry provider, `OTEL_*` variables) and
//! `accounts_and_state` (a global debug-level log capture that its credential test reads, the
//! sealing key in the environment).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/daemon.rs"]
mod daemon_common;

mod ask_and_eval_cli;
mod asks_beyond_the_graph;
mod complexfuncbench_convert;
mod compose_kinds;
mod console;
mod console_login;
mod counted_options;
mod daemon_api;
mod daemon_binary;
mod daemon_connections;
mod daemon_learning;
mod daemon_tools;
mod deploy_files;
mod engine_runs;
mod eval_retrieval;
mod falkordb_script;
mod http_contract;
mod ingest_idempotency;
mod ingest_shared_data;
mod ingest_teaches;
mod interrupted_ingest;
mod llm_planner;
mod malformed_inputs;
mod mcp_import;
mod mcp_serve;
mod quantity_asks;
mod replay_choices;
mod replay_kinds;
mod replay_lookups;
mod replay_names;
mod reverse_chain_and_plans;
mod reverse_fallback;
mod reverse_reach;
mod route_legs;
mod scale_out;
mod scratch_sweep;
mod search_and_index;
mod store_operations;
