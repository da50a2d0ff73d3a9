-- toolgraph's durable state: users, API keys (digests only), sessions, runs, saved chains, tool
-- credentials (sealed or referenced), approvals and the audit log. Portable SQL: the same
-- migration runs on SQLite (embedded default) and PostgreSQL. Times are milliseconds since the
-- Unix epoch; JSON documents are TEXT.
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    password_hash TEXT,
    created_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id),
    digest TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    label TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT,
    revoked_ms BIGINT
);
CREATE INDEX IF NOT EXISTS api_keys_user ON api_keys (user_id);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    state TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions (user_id, updated_ms);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    request TEXT NOT NULL,
    options TEXT NOT NULL,
    status TEXT NOT NULL,
    tools TEXT NOT NULL,
    body TEXT NOT NULL,
    pending TEXT,
    lease_until_ms BIGINT,
    created_ms BIGINT NOT NULL,
    finished_ms BIGINT,
    duration_ms BIGINT
);
CREATE INDEX IF NOT EXISTS runs_user_created ON runs (user_id, created_ms);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_ms);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE TABLE IF NOT EXISTS approvals (
    run_id TEXT NOT NULL,
    call_key TEXT NOT NULL,
    decision TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    reason TEXT NOT NULL,
    decided_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, call_key)
);
CREATE TABLE IF NOT EXISTS approval_apis (
    api_id TEXT PRIMARY KEY,
    set_by TEXT NOT NULL,
    set_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS chains (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    steps TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS chains_user ON chains (user_id, updated_ms);
CREATE TABLE IF NOT EXISTS credentials (
    scope TEXT NOT NULL,
    name TEXT NOT NULL,
    placement TEXT NOT NULL,
    host TEXT NOT NULL,
    sealed TEXT,
    reference TEXT,
    updated_by TEXT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (scope, name)
);
CREATE TABLE IF NOT EXISTS audit (
    id TEXT PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at_ms);
