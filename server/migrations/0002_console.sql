-- Console logins: a browser's cookie session (only its SHA-256 digest is stored) and the CSRF
-- token its state-changing requests must echo. Bootstrap-key logins have no users row: their
-- name and role are kept here; a user's role is read from users at every request.
CREATE TABLE console_logins (
    digest TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    csrf TEXT NOT NULL,
    -- the digest of the API key it was made with (NULL: a password): revoking the key ends it
    key_digest TEXT,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
CREATE INDEX console_logins_expiry ON console_logins (expires_ms);
CREATE INDEX console_logins_key ON console_logins (key_digest);
