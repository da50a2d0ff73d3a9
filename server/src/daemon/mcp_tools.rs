//! The tools toolgraph serves over MCP ([`super::mcp_serve`]): their names, descriptions, input
//! schemas (the HTTP API's, in small) and annotations.

use rmcp::model::Tool;
use serde_json::json;
use std::sync::OnceLock;

/// The five tools (their schemas are the API's, in small).
pub(super) fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let defs = json!([
            {
                "name": "search_tools",
                "title": "Search the APIs",
                "description": "Find the APIs (of thousands) that fit a task: hybrid retrieval (BM25 + embeddings) over names and docs. Returns API ids with tool, category and score, and the categories of the hits.",
                "inputSchema": {"type": "object", "properties": {
                    "query": {"type": "string", "description": "What the API should do", "maxLength": 1000},
                    "k": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many (default 10)"},
                    "category": {"type": "string", "description": "Only this category (name or slug)"},
                    "tool": {"type": "string", "description": "Only this tool (name or slug)"}
                }, "required": ["query"]},
                "annotations": {"readOnlyHint": true, "openWorldHint": false}
            },
            {
                "name": "orchestrate",
                "title": "Plan and execute a request",
                "description": "Plan a chain of API calls for a request over the tool graph and execute it for real. Each step is reported as progress. When an argument is missing the user is asked (elicitation); without elicitation the result has status needs_input: call again with session_id and the values in `given`. Returns status (answered, gave_up, needs_input, ...), answer, chain and run_id.",
                "inputSchema": {"type": "object", "properties": {
                    "request": {"type": "string", "description": "What to do, in words", "maxLength": 4000},
                    "session_id": {"type": "string", "description": "Continue a conversation (from an earlier result)"},
                    "given": {"type": "object", "description": "Values for parameters (e.g. the answer to needs_input)"},
                    "planner": {"type": "string", "enum": toolgraph_schema::PlannerKind::names()},
                    "model": {"type": "string", "description": "For the llm planner: a configured model"},
                    "mode": {"type": "string", "enum": toolgraph_schema::Mode::names()},
                    "backward": {"type": "boolean", "description": "Plan target-first (Reverse Chain)"},
                    "dry_run": {"type": "boolean", "description": "Plan only: nothing is sent; the chain comes back with its data flow as $varN.field$ references"}
                }, "required": ["request"]},
                "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": true}
            },
            {
                "name": "execute_chain",
                "title": "Execute a chain as written",
                "description": "Execute a given chain of API calls (each step {api, arguments}; `$varN.field$` refers to step N's output) or a saved chain by id. Every step is checked against the API's schema first. Steps are reported as progress.",
                "inputSchema": {"type": "object", "properties": {
                    "steps": {"type": "array", "items": {"type": "object", "properties": {"api": {"type": "string"}, "arguments": {"type": "object"}}, "required": ["api"]}, "maxItems": 50},
                    "chain_id": {"type": "string", "description": "A saved chain instead of steps"},
                    "request": {"type": "string", "description": "What the chain is for"},
                    "given": {"type": "object"}
                }},
                "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": true}
            },
            {
                "name": "get_run",
                "title": "A run",
                "description": "A run by id: request, status, answer, chain, judgement and the full trace.",
                "inputSchema": {"type": "object", "properties": {"run_id": {"type": "string"}}, "required": ["run_id"]},
                "annotations": {"readOnlyHint": true, "openWorldHint": false}
            },
            {
                "name": "graph_neighbors",
                "title": "An API's neighbourhood in the tool graph",
                "description": "The APIs observed after (successors, with static and dynamic NEXT weights) and before an API, or the usual first APIs (id START).",
                "inputSchema": {"type": "object", "properties": {"id": {"type": "string", "description": "An API id (category/tool/api) or START"}, "k": {"type": "integer", "minimum": 1, "maximum": 50}}, "required": ["id"]},
                "annotations": {"readOnlyHint": true, "openWorldHint": false}
            }
        ]);
        serde_json::from_value(defs).expect("the MCP tool definitions are valid")
    })
}
