-- MCP servers whose tools are APIs of the graph: stdio ones (a command line, added by operators
-- with `toolgraph tools add-mcp`) and Streamable HTTP ones (a URL; also POST /v1/mcp-servers).
CREATE TABLE mcp_servers (
    name TEXT PRIMARY KEY,
    command TEXT,
    url TEXT,
    added_by TEXT NOT NULL,
    added_ms BIGINT NOT NULL
);
