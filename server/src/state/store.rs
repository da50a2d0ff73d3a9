//! The store itself: one sqlx `Any` pool over SQLite or PostgreSQL, its migrations, and the helpers
//! every group of tables shares (errors without secrets, ids, digests, JSON text).

use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::AnyPool;
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

pub(super) fn err(what: &str) -> impl Fn(sqlx::Error) -> StateError + '_ {
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

fn migrator() -> Migrator {
    Migrator {
        migrations: Cow::Owned(vec![
            Migration::new(
                1,
                Cow::Borrowed("state"),
                MigrationType::Simple,
                Cow::Borrowed(include_str!("../../migrations/0001_state.sql")),
                false,
            ),
            Migration::new(
                2,
                Cow::Borrowed("console"),
                MigrationType::Simple,
                Cow::Borrowed(include_str!("../../migrations/0002_console.sql")),
                false,
            ),
            Migration::new(
                3,
                Cow::Borrowed("mcp"),
                MigrationType::Simple,
                Cow::Borrowed(include_str!("../../migrations/0003_mcp.sql")),
                false,
            ),
        ]),
        ..Migrator::DEFAULT
    }
}

/// The durable state of one deployment.
#[derive(Clone)]
pub struct StateStore {
    pub(super) pool: AnyPool,
    pub(super) backend: &'static str,
    /// Run and session records wait for PostgreSQL's WAL flush (`state.synchronous_runs`).
    pub(super) synchronous_runs: bool,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateStore({})", self.backend)
    }
}

pub(super) fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

pub(super) fn tools_text(tools: &[String]) -> String {
    // Space-delimited and lower-cased, so `LIKE '% tool/%'` finds an API or a tool prefix.
    format!(" {} ", tools.iter().map(|t| t.to_lowercase().replace(' ', "_")).collect::<Vec<_>>().join(" "))
}

/// A `LIKE` pattern for a literal substring (`\` escapes).
pub(super) fn like_literal(s: &str) -> String {
    s.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

impl StateStore {
    /// Open (and migrate) the store at `url`: `sqlite:PATH` / `sqlite://PATH` (created when
    /// missing; `sqlite::memory:` for a throw-away one) or `postgres://USER@HOST:PORT/DB` (the
    /// password from `TOOLGRAPH_STATE_PASSWORD(_FILE)`, never in the URL or configuration).
    pub async fn open(url: &str, max_connections: u32) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let (backend, connect_url) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut u =
                reqwest::Url::parse(url).map_err(|e| StateError(format!("state.url is not a PostgreSQL URL: {e}")))?;
            if u.password().is_some() {
                return Err(StateError("state.url holds a password: put it in TOOLGRAPH_STATE_PASSWORD or TOOLGRAPH_STATE_PASSWORD_FILE instead".into()));
            }
            if let Some(p) = toolgraph_schema::secrets::env_secret("TOOLGRAPH_STATE_PASSWORD").map_err(StateError)? {
                use secrecy::ExposeSecret;
                u.set_password(Some(p.expose_secret()))
                    .map_err(|_| StateError("state.url cannot take a password".into()))?;
            }
            ("postgres", u.to_string())
        } else if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            if path == ":memory:" {
                ("sqlite", "sqlite::memory:".to_string())
            } else {
                let file = path.split('?').next().unwrap_or_default();
                if let Some(dir) = std::path::Path::new(file).parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| StateError(format!("state store: cannot create {}: {e}", dir.display())))?;
                }
                ("sqlite", format!("sqlite://{file}?mode=rwc"))
            }
        } else {
            return Err(StateError(format!(
                "state.url `{}` is neither sqlite:PATH nor postgres://…",
                without_secrets(url).chars().take(80).collect::<String>()
            )));
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
        migrator()
            .run(&pool)
            .await
            .map_err(|e| StateError(format!("state store: migrating: {}", without_secrets(&e.to_string()))))?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Role, RunFilter, RunRecord};
    use serde_json::json;

    #[test]
    fn errors_hide_url_passwords_and_like_patterns_are_literal() {
        assert_eq!(
            without_secrets("error connecting to postgres://tg:hunter2@db:5432/tg"),
            "error connecting to postgres://…@db:5432/tg"
        );
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
            let r = RunRecord {
                id: format!("run_{i}"),
                user_id: "u".into(),
                session_id: "s".into(),
                request: format!("request {i}"),
                options: json!({}),
                status: status.into(),
                tools: vec!["a/b/c".into()],
                body: json!({"answer": "x"}),
                pending: None,
                lease_until_ms: None,
                created_ms: 1000 + i,
                finished_ms: None,
                duration_ms: None,
            };
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
