//! The daemon's durable state (the `StateStore` port): users and their API keys (digests only),
//! conversational sessions, runs (request, owner, status, chain, trace, answer, timings), saved
//! chains, tool credentials (sealed, or referenced by environment variable / file), approvals and
//! an audit log.
//!
//! One code path, two adapters: sqlx's `Any` driver over **SQLite** (the embedded default, a file
//! under `.tgdata/`) or **PostgreSQL** (production: several daemon replicas share it). The schema is
//! one portable migration (`server/migrations/`), applied at open under sqlx's migration lock, so
//! replicas starting together migrate once. Every statement uses `$N` parameters (both drivers take
//! them); times are milliseconds since the epoch, JSON documents are text.

pub mod secrets;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::AnyPool;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::Row;
use std::borrow::Cow;
use std::time::Duration;

/// A failure of the state store: what was being done, and why (never a secret or a URL's password).
#[derive(Debug, Clone)]
pub struct StateError(pub String);

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StateError {}

pub type Result<T> = std::result::Result<T, StateError>;

fn err(what: &str) -> impl Fn(sqlx::Error) -> StateError + '_ {
    move |e| StateError(format!("state store: {what}: {}", without_secrets(&e.to_string())))
}

/// Error texts never carry a connection URL's password.
fn without_secrets(s: &str) -> String {
    match (s.find("://"), s.find('@')) {
        (Some(a), Some(b)) if b > a => format!("{}://…@{}", &s[..a], &s[b + 1..]),
        _ => s.to_string(),
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// `prefix_` + `bytes` random bytes in hex.
pub fn random_id(prefix: &str, bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).expect("the operating system's random source");
    format!("{prefix}_{}", hex(&b))
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// SHA-256 of an API key, hex: what the store keeps.
pub fn key_digest(key: &str) -> String {
    hex(&Sha256::digest(key.trim().as_bytes()))
}

/// Roles: admins manage tools, statuses, Cypher, credentials and users; users run requests and
/// see only their own runs, sessions and saved chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Admin,
    User,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "user" => Some(Role::User),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::User => "user",
        }
    }
}

/// Who is calling: a user (by one of their keys), a bootstrap key, or the local anonymous caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Caller {
    pub user_id: String,
    pub name: String,
    pub role: Role,
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub has_password: bool,
    pub created_ms: i64,
}

/// A key's record (never the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyInfo {
    pub id: String,
    pub user_id: String,
    /// The key's first characters, to recognise it.
    pub prefix: String,
    pub label: String,
    pub created_ms: i64,
    pub expires_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub id: String,
    pub user_id: String,
    pub session_id: String,
    pub request: String,
    /// How it was asked (planner, model, mode, backward, given, or a user chain): what a re-run reuses.
    pub options: Value,
    pub status: String,
    /// API ids of its chain.
    pub tools: Vec<String>,
    /// The stored run: the result body with the request and the trace.
    pub body: Value,
    /// The call awaiting approval, while paused.
    pub pending: Option<Value>,
    pub lease_until_ms: Option<i64>,
    pub created_ms: i64,
    pub finished_ms: Option<i64>,
    pub duration_ms: Option<i64>,
}

/// A run in a listing (no trace).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub user_id: String,
    pub session_id: String,
    pub request: String,
    pub status: String,
    pub tools: Vec<String>,
    pub answer: String,
    pub created_ms: i64,
    pub duration_ms: Option<i64>,
}

/// Filters of `GET /v1/runs`.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// `None`: every user's (admins only).
    pub user_id: Option<String>,
    pub status: Option<String>,
    /// Words in the request (case-insensitive substring).
    pub text: Option<String>,
    /// An API id or a prefix of one (`category/tool`).
    pub tool: Option<String>,
    /// Page cursor: runs strictly older than this (`next` of the previous page).
    pub before: Option<(i64, String)>,
    pub limit: usize,
}

/// A saved chain (template).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SavedChain {
    pub chain_id: String,
    pub user_id: String,
    pub name: String,
    pub description: String,
    pub steps: Value,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// A stored credential entry (the value sealed, or a reference to where it lives).
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialRow {
    pub scope: String,
    pub name: String,
    pub placement: String,
    pub host: String,
    pub sealed: Option<String>,
    pub reference: Option<String>,
    pub updated_by: String,
    pub updated_ms: i64,
}

/// What retention removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    pub runs: u64,
    pub sessions: u64,
    pub audit: u64,
}

fn migrator() -> Migrator {
    Migrator {
        migrations: Cow::Owned(vec![
            Migration::new(1, Cow::Borrowed("state"), MigrationType::Simple, Cow::Borrowed(include_str!("../../migrations/0001_state.sql")), false),
            Migration::new(2, Cow::Borrowed("console"), MigrationType::Simple, Cow::Borrowed(include_str!("../../migrations/0002_console.sql")), false),
            Migration::new(3, Cow::Borrowed("mcp"), MigrationType::Simple, Cow::Borrowed(include_str!("../../migrations/0003_mcp.sql")), false),
        ]),
        ..Migrator::DEFAULT
    }
}

/// The durable state of one deployment.
#[derive(Clone)]
pub struct StateStore {
    pool: AnyPool,
    backend: &'static str,
    /// Run and session records wait for PostgreSQL's WAL flush (`state.synchronous_runs`).
    synchronous_runs: bool,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateStore({})", self.backend)
    }
}

const RUN_COLUMNS: &str = "id, user_id, session_id, request, options, status, tools, body, pending, lease_until_ms, created_ms, finished_ms, duration_ms";

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn tools_text(tools: &[String]) -> String {
    // Space-delimited and lower-cased, so `LIKE '% tool/%'` finds an API or a tool prefix.
    format!(" {} ", tools.iter().map(|t| t.to_lowercase().replace(' ', "_")).collect::<Vec<_>>().join(" "))
}

/// A `LIKE` pattern for a literal substring (`\` escapes).
fn like_literal(s: &str) -> String {
    s.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

async fn put_session_on<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(e: E, id: &str, user_id: &str, state: &Value) -> Result<()> {
    let now = now_ms();
    sqlx::query("INSERT INTO sessions (id, user_id, state, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms")
        .bind(id)
        .bind(user_id)
        .bind(state.to_string())
        .bind(now)
        .bind(now)
        .execute(e)
        .await
        .map_err(err("writing a session"))?;
    Ok(())
}

async fn put_run_on<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(e: E, r: &RunRecord) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO runs ({RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, tools = excluded.tools, body = excluded.body, pending = excluded.pending, \
         lease_until_ms = excluded.lease_until_ms, finished_ms = excluded.finished_ms, duration_ms = excluded.duration_ms"
    ))
    .bind(&r.id)
    .bind(&r.user_id)
    .bind(&r.session_id)
    .bind(&r.request)
    .bind(r.options.to_string())
    .bind(&r.status)
    .bind(tools_text(&r.tools))
    .bind(r.body.to_string())
    .bind(r.pending.as_ref().map(Value::to_string))
    .bind(r.lease_until_ms)
    .bind(r.created_ms)
    .bind(r.finished_ms)
    .bind(r.duration_ms)
    .execute(e)
    .await
    .map_err(err("writing a run"))?;
    Ok(())
}

impl StateStore {
    /// Open (and migrate) the store at `url`: `sqlite:PATH` / `sqlite://PATH` (created when
    /// missing; `sqlite::memory:` for a throw-away one) or `postgres://USER@HOST:PORT/DB` (the
    /// password from `TOOLGRAPH_STATE_PASSWORD(_FILE)`, never in the URL or configuration).
    pub async fn open(url: &str, max_connections: u32) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let (backend, connect_url) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut u = reqwest::Url::parse(url).map_err(|e| StateError(format!("state.url is not a PostgreSQL URL: {e}")))?;
            if u.password().is_some() {
                return Err(StateError("state.url holds a password: put it in TOOLGRAPH_STATE_PASSWORD or TOOLGRAPH_STATE_PASSWORD_FILE instead".into()));
            }
            if let Some(p) = secrets::env_secret("TOOLGRAPH_STATE_PASSWORD").map_err(StateError)? {
                use secrecy::ExposeSecret;
                u.set_password(Some(p.expose_secret())).map_err(|_| StateError("state.url cannot take a password".into()))?;
            }
            ("postgres", u.to_string())
        } else if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            if path == ":memory:" {
                ("sqlite", "sqlite::memory:".to_string())
            } else {
                let file = path.split('?').next().unwrap_or_default();
                if let Some(dir) = std::path::Path::new(file).parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| StateError(format!("state store: cannot create {}: {e}", dir.display())))?;
                }
                ("sqlite", format!("sqlite://{file}?mode=rwc"))
            }
        } else {
            return Err(StateError(format!("state.url `{}` is neither sqlite:PATH nor postgres://…", without_secrets(url).chars().take(80).collect::<String>())));
        };
        let memory = connect_url == "sqlite::memory:";
        // SQLite takes one writer at a time: one connection queues statements in the pool instead
        // of letting writers collide and sleep in SQLite's busy handler (4x slower at 8 clients).
        let mut opts = AnyPoolOptions::new()
            .max_connections(if backend == "sqlite" { 1 } else { max_connections.max(1) })
            .acquire_timeout(Duration::from_secs(10));
        if memory {
            // One connection that never closes: the in-memory database lives as long as it does.
            opts = opts.min_connections(1).idle_timeout(None).max_lifetime(None);
        }
        if backend == "sqlite" {
            opts = opts.after_connect(|conn, _| {
                Box::pin(async move {
                    use sqlx::Executor;
                    conn.execute("PRAGMA busy_timeout = 10000").await?;
                    conn.execute("PRAGMA foreign_keys = ON").await?;
                    conn.execute("PRAGMA synchronous = NORMAL").await?;
                    Ok(())
                })
            });
        }
        let pool = opts.connect(&connect_url).await.map_err(err("connect"))?;
        if backend == "sqlite" && !memory {
            sqlx::query("PRAGMA journal_mode = WAL").execute(&pool).await.map_err(err("WAL"))?;
        }
        migrator().run(&pool).await.map_err(|e| StateError(format!("state store: migrating: {}", without_secrets(&e.to_string()))))?;
        Ok(StateStore { pool, backend, synchronous_runs: false })
    }

    /// Whether run and session records wait for PostgreSQL's WAL flush (default: no; keys,
    /// credentials, approvals and every other record always do).
    pub fn with_synchronous_runs(mut self, on: bool) -> Self {
        self.synchronous_runs = on;
        self
    }

    /// A throw-away SQLite store in memory (tests, one-shot commands).
    pub async fn memory() -> Result<Self> {
        Self::open("sqlite::memory:", 1).await
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(err("ping"))?;
        Ok(())
    }

    // ---- users and keys ----

    /// Add a user (`name`: 1..64 visible characters, unique).
    pub async fn add_user(&self, name: &str, role: Role, password_hash: Option<String>) -> Result<User> {
        if name.is_empty() || name.chars().count() > 64 || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(StateError("a user name is 1 to 64 characters without spaces".into()));
        }
        if self.user_by_name(name).await?.is_some() {
            return Err(StateError(format!("user `{name}` exists already")));
        }
        let u = User { id: random_id("usr", 8), name: name.into(), role, has_password: password_hash.is_some(), created_ms: now_ms() };
        sqlx::query("INSERT INTO users (id, name, role, password_hash, created_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&u.id)
            .bind(&u.name)
            .bind(role.as_str())
            .bind(password_hash)
            .bind(u.created_ms)
            .execute(&self.pool)
            .await
            .map_err(err("adding a user"))?;
        Ok(u)
    }

    fn user_of(r: &AnyRow) -> Result<User> {
        let role: String = r.try_get("role").map_err(err("reading a user"))?;
        Ok(User {
            id: r.try_get("id").map_err(err("reading a user"))?,
            name: r.try_get("name").map_err(err("reading a user"))?,
            role: Role::parse(&role).unwrap_or(Role::User),
            has_password: r.try_get::<Option<String>, _>("password_hash").map_err(err("reading a user"))?.is_some(),
            created_ms: r.try_get("created_ms").map_err(err("reading a user"))?,
        })
    }

    pub async fn users(&self) -> Result<Vec<User>> {
        let rows = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users ORDER BY created_ms, id").fetch_all(&self.pool).await.map_err(err("listing users"))?;
        rows.iter().map(Self::user_of).collect()
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>> {
        let row = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users WHERE name = $1").bind(name).fetch_optional(&self.pool).await.map_err(err("reading a user"))?;
        row.as_ref().map(Self::user_of).transpose()
    }

    pub async fn user(&self, id: &str) -> Result<Option<User>> {
        let row = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users WHERE id = $1").bind(id).fetch_optional(&self.pool).await.map_err(err("reading a user"))?;
        row.as_ref().map(Self::user_of).transpose()
    }

    /// The user's password hash (argon2id PHC string), if they have one.
    pub async fn password_hash(&self, name: &str) -> Result<Option<(User, String)>> {
        let row = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users WHERE name = $1").bind(name).fetch_optional(&self.pool).await.map_err(err("reading a user"))?;
        let Some(r) = row else { return Ok(None) };
        let hash: Option<String> = r.try_get("password_hash").map_err(err("reading a user"))?;
        match hash {
            Some(h) => Ok(Some((Self::user_of(&r)?, h))),
            None => Ok(None),
        }
    }

    /// Whether any user has a key that could be valid or a password (the daemon then requires
    /// a key or a console login).
    pub async fn has_keys(&self) -> Result<bool> {
        let n: i64 = sqlx::query("SELECT (SELECT COUNT(*) FROM api_keys WHERE revoked_ms IS NULL) + (SELECT COUNT(*) FROM users WHERE password_hash IS NOT NULL) AS n")
            .fetch_one(&self.pool)
            .await
            .map_err(err("counting keys"))?
            .try_get("n")
            .map_err(err("counting keys"))?;
        Ok(n > 0)
    }

    // ---- MCP servers ----

    /// Add or replace an MCP server (its tools are imported by the caller).
    #[cfg(feature = "mcp")]
    pub async fn put_mcp_server(&self, s: &crate::mcp::McpServer, by: &str) -> Result<()> {
        sqlx::query("DELETE FROM mcp_servers WHERE name = $1").bind(&s.name).execute(&self.pool).await.map_err(err("adding an MCP server"))?;
        sqlx::query("INSERT INTO mcp_servers (name, command, url, added_by, added_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&s.name)
            .bind(&s.command)
            .bind(&s.url)
            .bind(by)
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(err("adding an MCP server"))?;
        Ok(())
    }

    /// Every MCP server, by name.
    #[cfg(feature = "mcp")]
    pub async fn mcp_servers(&self) -> Result<Vec<crate::mcp::McpServer>> {
        let rows = sqlx::query("SELECT name, command, url FROM mcp_servers ORDER BY name").fetch_all(&self.pool).await.map_err(err("reading MCP servers"))?;
        rows.iter()
            .map(|r| {
                Ok(crate::mcp::McpServer {
                    name: r.try_get("name").map_err(err("reading MCP servers"))?,
                    command: r.try_get::<Option<String>, _>("command").map_err(err("reading MCP servers"))?,
                    url: r.try_get::<Option<String>, _>("url").map_err(err("reading MCP servers"))?,
                })
            })
            .collect()
    }

    // ---- console logins ----

    /// Record a console login: `token` (the cookie's value, stored as a digest) for `caller`,
    /// with the CSRF token its state-changing requests echo, valid until `expires_ms`.
    /// `key`: the API key it was made with (none: a password), so that revoking the key ends it.
    pub async fn put_login(&self, token: &str, caller: &Caller, csrf: &str, expires_ms: i64, key: Option<&str>) -> Result<()> {
        sqlx::query("INSERT INTO console_logins (digest, user_id, name, role, csrf, created_ms, expires_ms, key_digest) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(key_digest(token))
            .bind(&caller.user_id)
            .bind(&caller.name)
            .bind(caller.role.as_str())
            .bind(csrf)
            .bind(now_ms())
            .bind(expires_ms)
            .bind(key.map(key_digest))
            .execute(&self.pool)
            .await
            .map_err(err("recording a login"))?;
        Ok(())
    }

    /// The caller and CSRF token of a console login that has not expired; a user's current role
    /// (a login of a user deleted since is no login).
    pub async fn login(&self, token: &str) -> Result<Option<(Caller, String)>> {
        let row = sqlx::query("SELECT l.user_id, l.name, l.role, l.csrf, u.role AS user_role, u.name AS user_name FROM console_logins l LEFT JOIN users u ON u.id = l.user_id WHERE l.digest = $1 AND l.expires_ms > $2")
            .bind(key_digest(token))
            .bind(now_ms())
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a login"))?;
        let Some(r) = row else { return Ok(None) };
        let get = |c: &str| -> Result<Option<String>> { r.try_get::<Option<String>, _>(c).map_err(err("reading a login")) };
        let user_id = get("user_id")?.unwrap_or_default();
        let (name, role) = match (get("user_name")?, get("user_role")?) {
            (Some(n), Some(role)) => (n, role),
            _ if user_id == "bootstrap" => (get("name")?.unwrap_or_default(), get("role")?.unwrap_or_default()),
            _ => return Ok(None),
        };
        let role = Role::parse(&role).ok_or_else(|| StateError(format!("login of {user_id}: unknown role `{role}`")))?;
        Ok(Some((Caller { user_id, name, role }, get("csrf")?.unwrap_or_default())))
    }

    /// End the console logins made with a key (it was revoked); how many.
    pub async fn delete_logins_of_key(&self, key_id: &str) -> Result<u64> {
        let n = sqlx::query("DELETE FROM console_logins WHERE key_digest IN (SELECT digest FROM api_keys WHERE id = $1)").bind(key_id).execute(&self.pool).await.map_err(err("ending logins"))?.rows_affected();
        Ok(n)
    }

    /// End a console login (logout).
    pub async fn delete_login(&self, token: &str) -> Result<bool> {
        let n = sqlx::query("DELETE FROM console_logins WHERE digest = $1").bind(key_digest(token)).execute(&self.pool).await.map_err(err("ending a login"))?.rows_affected();
        Ok(n > 0)
    }

    /// Create a key for a user: returned once (only its digest is stored).
    pub async fn add_key(&self, user_id: &str, label: &str, expires_ms: Option<i64>) -> Result<(KeyInfo, String)> {
        if self.user(user_id).await?.is_none() {
            return Err(StateError(format!("no user {user_id}")));
        }
        let key = random_id("tgk", 24);
        let info = KeyInfo { id: random_id("key", 8), user_id: user_id.into(), prefix: key[..10].to_string(), label: label.chars().take(100).collect(), created_ms: now_ms(), expires_ms, revoked_ms: None };
        sqlx::query("INSERT INTO api_keys (id, user_id, digest, prefix, label, created_ms, expires_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)")
            .bind(&info.id)
            .bind(user_id)
            .bind(key_digest(&key))
            .bind(&info.prefix)
            .bind(&info.label)
            .bind(info.created_ms)
            .bind(expires_ms)
            .execute(&self.pool)
            .await
            .map_err(err("adding a key"))?;
        Ok((info, key))
    }

    pub async fn keys(&self, user_id: Option<&str>) -> Result<Vec<KeyInfo>> {
        let sql = "SELECT id, user_id, prefix, label, created_ms, expires_ms, revoked_ms FROM api_keys";
        let rows = match user_id {
            Some(u) => sqlx::query(&format!("{sql} WHERE user_id = $1 ORDER BY created_ms, id")).bind(u).fetch_all(&self.pool).await,
            None => sqlx::query(&format!("{sql} ORDER BY created_ms, id")).fetch_all(&self.pool).await,
        }
        .map_err(err("listing keys"))?;
        rows.iter()
            .map(|r| {
                Ok(KeyInfo {
                    id: r.try_get("id").map_err(err("reading a key"))?,
                    user_id: r.try_get("user_id").map_err(err("reading a key"))?,
                    prefix: r.try_get("prefix").map_err(err("reading a key"))?,
                    label: r.try_get("label").map_err(err("reading a key"))?,
                    created_ms: r.try_get("created_ms").map_err(err("reading a key"))?,
                    expires_ms: r.try_get("expires_ms").map_err(err("reading a key"))?,
                    revoked_ms: r.try_get("revoked_ms").map_err(err("reading a key"))?,
                })
            })
            .collect()
    }

    /// Revoke a key by id; `false` when there is no such live key.
    pub async fn revoke_key(&self, key_id: &str) -> Result<bool> {
        let r = sqlx::query("UPDATE api_keys SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL").bind(now_ms()).bind(key_id).execute(&self.pool).await.map_err(err("revoking a key"))?;
        Ok(r.rows_affected() > 0)
    }

    /// The caller a presented key belongs to: not revoked, not expired.
    pub async fn caller_of_key(&self, key: &str) -> Result<Option<Caller>> {
        let row = sqlx::query("SELECT u.id AS id, u.name AS name, u.role AS role, k.expires_ms AS expires_ms FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.digest = $1 AND k.revoked_ms IS NULL")
            .bind(key_digest(key))
            .fetch_optional(&self.pool)
            .await
            .map_err(err("checking a key"))?;
        let Some(r) = row else { return Ok(None) };
        let expires: Option<i64> = r.try_get("expires_ms").map_err(err("checking a key"))?;
        if expires.is_some_and(|e| e <= now_ms()) {
            return Ok(None);
        }
        let role: String = r.try_get("role").map_err(err("checking a key"))?;
        Ok(Some(Caller { user_id: r.try_get("id").map_err(err("checking a key"))?, name: r.try_get("name").map_err(err("checking a key"))?, role: Role::parse(&role).unwrap_or(Role::User) }))
    }

    // ---- sessions ----

    /// A session's owner and state (`turns`, `earlier`, `given`).
    pub async fn session(&self, id: &str) -> Result<Option<(String, Value, i64)>> {
        let row = sqlx::query("SELECT user_id, state, updated_ms FROM sessions WHERE id = $1").bind(id).fetch_optional(&self.pool).await.map_err(err("reading a session"))?;
        row.map(|r| {
            let state: String = r.try_get("state").map_err(err("reading a session"))?;
            Ok((r.try_get("user_id").map_err(err("reading a session"))?, json_of(&state), r.try_get("updated_ms").map_err(err("reading a session"))?))
        })
        .transpose()
    }

    /// A user's sessions, most recently used first: (id, state, updated_ms).
    pub async fn list_sessions(&self, user_id: &str, limit: usize) -> Result<Vec<(String, Value, i64)>> {
        let rows = sqlx::query(&format!("SELECT id, state, updated_ms FROM sessions WHERE user_id = $1 ORDER BY updated_ms DESC LIMIT {}", limit.clamp(1, 200)))
            .bind(user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(err("listing sessions"))?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state").map_err(err("listing sessions"))?;
                Ok((r.try_get("id").map_err(err("listing sessions"))?, json_of(&state), r.try_get("updated_ms").map_err(err("listing sessions"))?))
            })
            .collect()
    }

    pub async fn put_session(&self, id: &str, user_id: &str, state: &Value) -> Result<()> {
        put_session_on(&self.pool, id, user_id, state).await
    }

    pub async fn delete_session(&self, id: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM sessions WHERE id = $1").bind(id).execute(&self.pool).await.map_err(err("deleting a session"))?;
        Ok(r.rows_affected() > 0)
    }

    // ---- runs ----

    /// Insert or replace a run.
    pub async fn put_run(&self, r: &RunRecord) -> Result<()> {
        put_run_on(&self.pool, r).await
    }

    /// A transaction for a run's records; on PostgreSQL without `synchronous_runs` it commits
    /// without waiting for the WAL flush (a PostgreSQL crash may lose the last fraction of a
    /// second of run records — never keys, credentials or decisions, which always wait).
    async fn run_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        let mut tx = self.pool.begin().await.map_err(err("beginning a transaction"))?;
        if self.backend == "postgres" && !self.synchronous_runs {
            sqlx::query("SET LOCAL synchronous_commit TO OFF").execute(&mut *tx).await.map_err(err("relaxed commit"))?;
        }
        Ok(tx)
    }

    /// A run starts: its record and its session's state, in one transaction.
    pub async fn start_run(&self, r: &RunRecord, session: Option<&Value>) -> Result<()> {
        let mut tx = self.run_tx().await?;
        if let Some(st) = session {
            put_session_on(&mut *tx, &r.session_id, &r.user_id, st).await?;
        }
        put_run_on(&mut *tx, r).await?;
        tx.commit().await.map_err(err("recording a run"))?;
        Ok(())
    }

    /// A run ends: its record, and its session updated by `update` (given the session's owner and
    /// state; `None`: leave it), in one transaction.
    pub async fn finish_run(&self, r: &RunRecord, update: impl FnOnce(Value) -> Option<Value>) -> Result<()> {
        let mut tx = self.run_tx().await?;
        put_run_on(&mut *tx, r).await?;
        // Locked until commit, so that two turns of one session ending together both land (SQLite:
        // the run's write above already holds the database's write lock).
        let lock = if self.backend == "postgres" { " FOR UPDATE" } else { "" };
        let row = sqlx::query(&format!("SELECT user_id, state FROM sessions WHERE id = $1{lock}")).bind(&r.session_id).fetch_optional(&mut *tx).await.map_err(err("reading a session"))?;
        if let Some(row) = row {
            let owner: String = row.try_get("user_id").map_err(err("reading a session"))?;
            let state: String = row.try_get("state").map_err(err("reading a session"))?;
            if let Some(new) = update(json_of(&state)) {
                put_session_on(&mut *tx, &r.session_id, &owner, &new).await?;
            }
        }
        tx.commit().await.map_err(err("recording a run"))?;
        Ok(())
    }

    fn run_of(r: &AnyRow) -> Result<RunRecord> {
        let e = || err("reading a run");
        let tools: String = r.try_get("tools").map_err(e())?;
        Ok(RunRecord {
            id: r.try_get("id").map_err(e())?,
            user_id: r.try_get("user_id").map_err(e())?,
            session_id: r.try_get("session_id").map_err(e())?,
            request: r.try_get("request").map_err(e())?,
            options: json_of(&r.try_get::<String, _>("options").map_err(e())?),
            status: r.try_get("status").map_err(e())?,
            tools: tools.split_whitespace().map(str::to_string).collect(),
            body: json_of(&r.try_get::<String, _>("body").map_err(e())?),
            pending: r.try_get::<Option<String>, _>("pending").map_err(e())?.map(|p| json_of(&p)),
            lease_until_ms: r.try_get("lease_until_ms").map_err(e())?,
            created_ms: r.try_get("created_ms").map_err(e())?,
            finished_ms: r.try_get("finished_ms").map_err(e())?,
            duration_ms: r.try_get("duration_ms").map_err(e())?,
        })
    }

    pub async fn run(&self, id: &str) -> Result<Option<RunRecord>> {
        let row = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1")).bind(id).fetch_optional(&self.pool).await.map_err(err("reading a run"))?;
        row.as_ref().map(Self::run_of).transpose()
    }

    /// Runs, newest first, filtered; and the cursor of the next page when there is one.
    pub async fn list_runs(&self, f: &RunFilter) -> Result<(Vec<RunSummary>, Option<String>)> {
        let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1");
        let mut binds: Vec<Value> = Vec::new();
        let param = |v: Value, binds: &mut Vec<Value>| {
            binds.push(v);
            format!("${}", binds.len())
        };
        if let Some(u) = &f.user_id {
            let p = param(json!(u), &mut binds);
            sql.push_str(&format!(" AND user_id = {p}"));
        }
        if let Some(s) = &f.status {
            let p = param(json!(s), &mut binds);
            sql.push_str(&format!(" AND status = {p}"));
        }
        if let Some(t) = f.text.as_deref().filter(|t| !t.trim().is_empty()) {
            let p = param(json!(format!("%{}%", like_literal(t.trim()))), &mut binds);
            sql.push_str(&format!(" AND LOWER(request) LIKE {p} ESCAPE '\\'"));
        }
        if let Some(t) = f.tool.as_deref().filter(|t| !t.trim().is_empty()) {
            let p = param(json!(format!("% {}%", like_literal(t.trim()))), &mut binds);
            sql.push_str(&format!(" AND tools LIKE {p} ESCAPE '\\'"));
        }
        if let Some((ms, id)) = &f.before {
            let a = param(json!(ms), &mut binds);
            let b = param(json!(ms), &mut binds);
            let c = param(json!(id), &mut binds);
            sql.push_str(&format!(" AND (created_ms < {a} OR (created_ms = {b} AND id < {c}))"));
        }
        let limit = f.limit.clamp(1, 200);
        sql.push_str(&format!(" ORDER BY created_ms DESC, id DESC LIMIT {}", limit + 1));
        let mut q = sqlx::query(&sql);
        for b in &binds {
            q = match b {
                Value::Number(n) => q.bind(n.as_i64().unwrap_or_default()),
                Value::String(s) => q.bind(s.clone()),
                other => q.bind(other.to_string()),
            };
        }
        let rows = q.fetch_all(&self.pool).await.map_err(err("listing runs"))?;
        let mut out = Vec::new();
        for r in rows.iter().take(limit) {
            let run = Self::run_of(r)?;
            out.push(RunSummary {
                answer: run.body.get("answer").and_then(Value::as_str).unwrap_or_default().chars().take(300).collect(),
                run_id: run.id,
                user_id: run.user_id,
                session_id: run.session_id,
                request: run.request,
                status: run.status,
                tools: run.tools,
                created_ms: run.created_ms,
                duration_ms: run.duration_ms,
            });
        }
        let next = (rows.len() > limit).then(|| out.last().map(|r| format!("{}_{}", r.created_ms, r.run_id))).flatten();
        Ok((out, next))
    }

    /// Claim a paused run whose lease ran out (its daemon went away): `true` when this caller got it.
    pub async fn claim_run(&self, id: &str, lease_ms: i64) -> Result<bool> {
        let now = now_ms();
        let r = sqlx::query("UPDATE runs SET lease_until_ms = $1 WHERE id = $2 AND status = 'awaiting_approval' AND (lease_until_ms IS NULL OR lease_until_ms < $3)")
            .bind(now + lease_ms)
            .bind(id)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(err("claiming a run"))?;
        Ok(r.rows_affected() > 0)
    }

    /// Pause a run on a call (`Some`: status `awaiting_approval`, leased until `lease_until_ms`) or
    /// let it go on (`None`: status `running`).
    pub async fn set_run_paused(&self, id: &str, pending: Option<&Value>, lease_until_ms: i64) -> Result<()> {
        match pending {
            Some(p) => sqlx::query("UPDATE runs SET status = 'awaiting_approval', pending = $1, lease_until_ms = $2 WHERE id = $3").bind(p.to_string()).bind(lease_until_ms).bind(id).execute(&self.pool).await,
            None => sqlx::query("UPDATE runs SET status = 'running', pending = NULL, lease_until_ms = NULL WHERE id = $1").bind(id).execute(&self.pool).await,
        }
        .map_err(err("pausing a run"))?;
        Ok(())
    }

    /// Extend the lease of a paused run this daemon is holding.
    pub async fn renew_lease(&self, id: &str, lease_ms: i64) -> Result<()> {
        sqlx::query("UPDATE runs SET lease_until_ms = $1 WHERE id = $2").bind(now_ms() + lease_ms).bind(id).execute(&self.pool).await.map_err(err("renewing a lease"))?;
        Ok(())
    }

    /// Let go of a paused run (this daemon stops): another daemon resumes it at once.
    pub async fn release_lease(&self, id: &str) -> Result<()> {
        sqlx::query("UPDATE runs SET lease_until_ms = 0 WHERE id = $1 AND status = 'awaiting_approval'").bind(id).execute(&self.pool).await.map_err(err("releasing a lease"))?;
        Ok(())
    }

    /// Paused runs nobody holds (lease expired).
    pub async fn orphaned_runs(&self) -> Result<Vec<RunRecord>> {
        let rows = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE status = 'awaiting_approval' AND (lease_until_ms IS NULL OR lease_until_ms < $1) ORDER BY created_ms LIMIT 50"))
            .bind(now_ms())
            .fetch_all(&self.pool)
            .await
            .map_err(err("listing paused runs"))?;
        rows.iter().map(Self::run_of).collect()
    }

    // ---- approvals ----

    pub async fn requires_approval(&self) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT api_id FROM approval_apis ORDER BY api_id").fetch_all(&self.pool).await.map_err(err("reading approvals"))?;
        rows.iter().map(|r| r.try_get::<String, _>("api_id").map_err(err("reading approvals"))).collect()
    }

    pub async fn set_requires_approval(&self, api_id: &str, on: bool, by: &str) -> Result<()> {
        if on {
            sqlx::query("INSERT INTO approval_apis (api_id, set_by, set_ms) VALUES ($1, $2, $3) ON CONFLICT (api_id) DO NOTHING").bind(api_id).bind(by).bind(now_ms()).execute(&self.pool).await
        } else {
            sqlx::query("DELETE FROM approval_apis WHERE api_id = $1").bind(api_id).execute(&self.pool).await
        }
        .map_err(err("setting approval"))?;
        Ok(())
    }

    /// Record a decision on a run's call; `false` when it was decided already (first decision wins).
    pub async fn decide(&self, run_id: &str, call_key: &str, approved: bool, by: &str, reason: &str) -> Result<bool> {
        let r = sqlx::query("INSERT INTO approvals (run_id, call_key, decision, decided_by, reason, decided_ms) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, call_key) DO NOTHING")
            .bind(run_id)
            .bind(call_key)
            .bind(if approved { "approved" } else { "rejected" })
            .bind(by)
            .bind(reason)
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(err("recording a decision"))?;
        Ok(r.rows_affected() > 0)
    }

    /// The decision on a run's call: (approved, by, reason).
    pub async fn decision(&self, run_id: &str, call_key: &str) -> Result<Option<(bool, String, String)>> {
        let row = sqlx::query("SELECT decision, decided_by, reason FROM approvals WHERE run_id = $1 AND call_key = $2").bind(run_id).bind(call_key).fetch_optional(&self.pool).await.map_err(err("reading a decision"))?;
        row.map(|r| {
            let d: String = r.try_get("decision").map_err(err("reading a decision"))?;
            Ok((d == "approved", r.try_get("decided_by").map_err(err("reading a decision"))?, r.try_get("reason").map_err(err("reading a decision"))?))
        })
        .transpose()
    }

    // ---- saved chains ----

    pub async fn put_chain(&self, c: &SavedChain) -> Result<()> {
        sqlx::query("INSERT INTO chains (id, user_id, name, description, steps, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO UPDATE SET name = excluded.name, description = excluded.description, steps = excluded.steps, updated_ms = excluded.updated_ms")
            .bind(&c.chain_id)
            .bind(&c.user_id)
            .bind(&c.name)
            .bind(&c.description)
            .bind(c.steps.to_string())
            .bind(c.created_ms)
            .bind(c.updated_ms)
            .execute(&self.pool)
            .await
            .map_err(err("saving a chain"))?;
        Ok(())
    }

    fn chain_of(r: &AnyRow) -> Result<SavedChain> {
        let e = || err("reading a chain");
        Ok(SavedChain {
            chain_id: r.try_get("id").map_err(e())?,
            user_id: r.try_get("user_id").map_err(e())?,
            name: r.try_get("name").map_err(e())?,
            description: r.try_get("description").map_err(e())?,
            steps: json_of(&r.try_get::<String, _>("steps").map_err(e())?),
            created_ms: r.try_get("created_ms").map_err(e())?,
            updated_ms: r.try_get("updated_ms").map_err(e())?,
        })
    }

    pub async fn chain(&self, id: &str) -> Result<Option<SavedChain>> {
        let row = sqlx::query("SELECT id, user_id, name, description, steps, created_ms, updated_ms FROM chains WHERE id = $1").bind(id).fetch_optional(&self.pool).await.map_err(err("reading a chain"))?;
        row.as_ref().map(Self::chain_of).transpose()
    }

    /// A user's saved chains, newest first; `q` filters by name/description.
    pub async fn chains(&self, user_id: &str, q: Option<&str>, limit: usize) -> Result<Vec<SavedChain>> {
        let limit = limit.clamp(1, 200);
        let rows = match q.filter(|q| !q.trim().is_empty()) {
            Some(q) => sqlx::query(&format!("SELECT id, user_id, name, description, steps, created_ms, updated_ms FROM chains WHERE user_id = $1 AND (LOWER(name) LIKE $2 ESCAPE '\\' OR LOWER(description) LIKE $2 ESCAPE '\\') ORDER BY updated_ms DESC, id DESC LIMIT {limit}"))
                .bind(user_id)
                .bind(format!("%{}%", like_literal(q.trim())))
                .fetch_all(&self.pool)
                .await,
            None => sqlx::query(&format!("SELECT id, user_id, name, description, steps, created_ms, updated_ms FROM chains WHERE user_id = $1 ORDER BY updated_ms DESC, id DESC LIMIT {limit}")).bind(user_id).fetch_all(&self.pool).await,
        }
        .map_err(err("listing chains"))?;
        rows.iter().map(Self::chain_of).collect()
    }

    pub async fn delete_chain(&self, id: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM chains WHERE id = $1").bind(id).execute(&self.pool).await.map_err(err("deleting a chain"))?;
        Ok(r.rows_affected() > 0)
    }

    // ---- credentials ----

    /// Replace every entry of a scope.
    pub async fn put_credentials(&self, scope: &str, rows: &[CredentialRow]) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(err("writing credentials"))?;
        sqlx::query("DELETE FROM credentials WHERE scope = $1").bind(scope).execute(&mut *tx).await.map_err(err("writing credentials"))?;
        for c in rows {
            sqlx::query("INSERT INTO credentials (scope, name, placement, host, sealed, reference, updated_by, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
                .bind(&c.scope)
                .bind(&c.name)
                .bind(&c.placement)
                .bind(&c.host)
                .bind(c.sealed.clone())
                .bind(c.reference.clone())
                .bind(&c.updated_by)
                .bind(c.updated_ms)
                .execute(&mut *tx)
                .await
                .map_err(err("writing credentials"))?;
        }
        tx.commit().await.map_err(err("writing credentials"))?;
        Ok(())
    }

    pub async fn credentials(&self) -> Result<Vec<CredentialRow>> {
        let rows = sqlx::query("SELECT scope, name, placement, host, sealed, reference, updated_by, updated_ms FROM credentials ORDER BY scope, name").fetch_all(&self.pool).await.map_err(err("reading credentials"))?;
        rows.iter()
            .map(|r| {
                let e = || err("reading credentials");
                Ok(CredentialRow {
                    scope: r.try_get("scope").map_err(e())?,
                    name: r.try_get("name").map_err(e())?,
                    placement: r.try_get("placement").map_err(e())?,
                    host: r.try_get("host").map_err(e())?,
                    sealed: r.try_get("sealed").map_err(e())?,
                    reference: r.try_get("reference").map_err(e())?,
                    updated_by: r.try_get("updated_by").map_err(e())?,
                    updated_ms: r.try_get("updated_ms").map_err(e())?,
                })
            })
            .collect()
    }

    /// The newest change to credentials (ms; 0: none): replicas reload when it moves.
    pub async fn credentials_version(&self) -> Result<(i64, i64)> {
        let r = sqlx::query("SELECT COUNT(*) AS n, MAX(updated_ms) AS m FROM credentials").fetch_one(&self.pool).await.map_err(err("reading credentials"))?;
        Ok((r.try_get("n").map_err(err("reading credentials"))?, r.try_get::<Option<i64>, _>("m").map_err(err("reading credentials"))?.unwrap_or(0)))
    }

    pub async fn delete_credentials(&self, scope: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM credentials WHERE scope = $1").bind(scope).execute(&self.pool).await.map_err(err("deleting credentials"))?;
        Ok(r.rows_affected() > 0)
    }

    // ---- audit and retention ----

    /// Append to the audit log (who did what to what; never a secret).
    pub async fn audit(&self, actor: &str, action: &str, target: &str, detail: Value) -> Result<()> {
        sqlx::query("INSERT INTO audit (id, at_ms, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(random_id("aud", 8))
            .bind(now_ms())
            .bind(actor)
            .bind(action)
            .bind(target)
            .bind(detail.to_string())
            .execute(&self.pool)
            .await
            .map_err(err("writing the audit log"))?;
        Ok(())
    }

    pub async fn audit_log(&self, limit: usize) -> Result<Vec<Value>> {
        let rows = sqlx::query(&format!("SELECT at_ms, actor, action, target, detail FROM audit ORDER BY at_ms DESC, id DESC LIMIT {}", limit.clamp(1, 1000))).fetch_all(&self.pool).await.map_err(err("reading the audit log"))?;
        rows.iter()
            .map(|r| {
                let e = || err("reading the audit log");
                Ok(json!({
                    "at_ms": r.try_get::<i64, _>("at_ms").map_err(e())?,
                    "actor": r.try_get::<String, _>("actor").map_err(e())?,
                    "action": r.try_get::<String, _>("action").map_err(e())?,
                    "target": r.try_get::<String, _>("target").map_err(e())?,
                    "detail": json_of(&r.try_get::<String, _>("detail").map_err(e())?),
                }))
            })
            .collect()
    }

    /// Remove finished runs older than `days` (0: no age limit) and beyond the newest `keep`
    /// (0: no count limit), sessions idle for `days`, audit entries older than `audit_days`.
    /// Paused runs are never removed.
    pub async fn enforce_retention(&self, days: u64, keep: u64, audit_days: u64) -> Result<Pruned> {
        let mut p = Pruned::default();
        let day_ms = 86_400_000i64;
        if days > 0 {
            let cutoff = now_ms() - days as i64 * day_ms;
            p.runs += sqlx::query("DELETE FROM runs WHERE created_ms < $1 AND status <> 'awaiting_approval' AND status <> 'running'").bind(cutoff).execute(&self.pool).await.map_err(err("retention"))?.rows_affected();
            p.sessions += sqlx::query("DELETE FROM sessions WHERE updated_ms < $1").bind(cutoff).execute(&self.pool).await.map_err(err("retention"))?.rows_affected();
        }
        if keep > 0 {
            let row = sqlx::query(&format!("SELECT created_ms FROM runs ORDER BY created_ms DESC LIMIT 1 OFFSET {}", keep - 1)).fetch_optional(&self.pool).await.map_err(err("retention"))?;
            if let Some(r) = row {
                let oldest_kept: i64 = r.try_get("created_ms").map_err(err("retention"))?;
                p.runs += sqlx::query("DELETE FROM runs WHERE created_ms < $1 AND status <> 'awaiting_approval' AND status <> 'running'").bind(oldest_kept).execute(&self.pool).await.map_err(err("retention"))?.rows_affected();
            }
        }
        sqlx::query("DELETE FROM console_logins WHERE expires_ms <= $1").bind(now_ms()).execute(&self.pool).await.map_err(err("retention"))?;
        if audit_days > 0 {
            p.audit += sqlx::query("DELETE FROM audit WHERE at_ms < $1").bind(now_ms() - audit_days as i64 * day_ms).execute(&self.pool).await.map_err(err("retention"))?.rows_affected();
        }
        Ok(p)
    }

    /// Every table's row count (for `toolgraph state stats` and tests).
    pub async fn counts(&self) -> Result<Map<String, Value>> {
        let mut m = Map::new();
        for t in ["users", "api_keys", "sessions", "runs", "chains", "credentials", "approvals", "audit"] {
            let n: i64 = sqlx::query(&format!("SELECT COUNT(*) AS n FROM {t}")).fetch_one(&self.pool).await.map_err(err("counting"))?.try_get("n").map_err(err("counting"))?;
            m.insert(t.into(), json!(n));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_hide_url_passwords_and_like_patterns_are_literal() {
        assert_eq!(without_secrets("error connecting to postgres://tg:hunter2@db:5432/tg"), "error connecting to postgres://…@db:5432/tg");
        assert_eq!(like_literal("50%_off\\"), "50\\%\\_off\\\\");
        assert_eq!(tools_text(&["A/b/C".into(), "x/y/z".into()]), " a/b/c x/y/z ");
    }

    #[tokio::test]
    async fn keys_are_stored_as_digests_and_revocable() {
        let s = StateStore::memory().await.unwrap();
        let u = s.add_user("ana", Role::User, None).await.unwrap();
        assert!(s.add_user("ana", Role::Admin, None).await.is_err(), "names are unique");
        let (info, key) = s.add_key(&u.id, "laptop", None).await.unwrap();
        assert!(key.starts_with(&info.prefix));
        assert_eq!(s.caller_of_key(&key).await.unwrap().map(|c| c.name), Some("ana".into()));
        assert!(s.caller_of_key("tgk_not-a-key").await.unwrap().is_none());
        let (_, expired) = s.add_key(&u.id, "old", Some(now_ms() - 1)).await.unwrap();
        assert!(s.caller_of_key(&expired).await.unwrap().is_none(), "expired keys are refused");
        assert!(s.revoke_key(&info.id).await.unwrap());
        assert!(!s.revoke_key(&info.id).await.unwrap());
        assert!(s.caller_of_key(&key).await.unwrap().is_none(), "revoked keys are refused");
    }

    #[tokio::test]
    async fn retention_keeps_the_newest_runs_and_never_paused_ones() {
        let s = StateStore::memory().await.unwrap();
        for i in 0..6i64 {
            let status = if i == 0 { "awaiting_approval" } else { "answered" };
            let r = RunRecord { id: format!("run_{i}"), user_id: "u".into(), session_id: "s".into(), request: format!("request {i}"), options: json!({}), status: status.into(), tools: vec!["a/b/c".into()], body: json!({"answer": "x"}), pending: None, lease_until_ms: None, created_ms: 1000 + i, finished_ms: None, duration_ms: None };
            s.put_run(&r).await.unwrap();
        }
        let p = s.enforce_retention(0, 3, 0).await.unwrap();
        assert_eq!(p.runs, 2, "runs 1 and 2 go; 0 waits for approval");
        let (left, _) = s.list_runs(&RunFilter { limit: 10, ..RunFilter::default() }).await.unwrap();
        let ids: Vec<&str> = left.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, vec!["run_5", "run_4", "run_3", "run_0"]);
        let p = s.enforce_retention(1, 0, 1).await.unwrap();
        assert_eq!(p.runs, 3, "older than a day, except the paused one");
    }
}
