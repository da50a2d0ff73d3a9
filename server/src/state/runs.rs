//! Runs: the request, owner, status, chain, trace and answer; leases of paused runs.

use super::sessions::put_session_on;
use super::store::{err, json_of, like_literal, now_ms, tools_text, Result, StateStore};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::any::AnyRow;
use sqlx::Row;

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
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
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

pub(super) const RUN_COLUMNS: &str = "id, user_id, session_id, request, options, status, tools, body, pending, lease_until_ms, created_ms, finished_ms, duration_ms";

pub(super) async fn put_run_on<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(e: E, r: &RunRecord) -> Result<()> {
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
    /// Insert or replace a run.
    pub async fn put_run(&self, r: &RunRecord) -> Result<()> {
        put_run_on(&self.pool, r).await
    }

    /// A transaction for a run's records; on PostgreSQL without `synchronous_runs` it commits
    /// without waiting for the WAL flush (a PostgreSQL crash may lose the last fraction of a
    /// second of run records — never keys, credentials or decisions, which always wait).
    pub(super) async fn run_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        let mut tx = self.pool.begin().await.map_err(err("beginning a transaction"))?;
        if self.backend == "postgres" && !self.synchronous_runs {
            sqlx::query("SET LOCAL synchronous_commit TO OFF")
                .execute(&mut *tx)
                .await
                .map_err(err("relaxed commit"))?;
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
        let row = sqlx::query(&format!("SELECT user_id, state FROM sessions WHERE id = $1{lock}"))
            .bind(&r.session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(err("reading a session"))?;
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

    pub(super) fn run_of(r: &AnyRow) -> Result<RunRecord> {
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
        let row = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a run"))?;
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

    /// Pause a run on a call (`Some`: status `awaiting_approval`) or let it go on (`None`: status
    /// `running`); either way held by this daemon until `lease_until_ms`.
    pub async fn set_run_paused(&self, id: &str, pending: Option<&Value>, lease_until_ms: i64) -> Result<()> {
        match pending {
            Some(p) => {
                sqlx::query(
                    "UPDATE runs SET status = 'awaiting_approval', pending = $1, lease_until_ms = $2 WHERE id = $3",
                )
                .bind(p.to_string())
                .bind(lease_until_ms)
                .bind(id)
                .execute(&self.pool)
                .await
            }
            None => {
                sqlx::query("UPDATE runs SET status = 'running', pending = NULL, lease_until_ms = $1 WHERE id = $2")
                    .bind(lease_until_ms)
                    .bind(id)
                    .execute(&self.pool)
                    .await
            }
        }
        .map_err(err("pausing a run"))?;
        Ok(())
    }

    /// Extend the lease of a paused run this daemon is holding.
    pub async fn renew_lease(&self, id: &str, lease_ms: i64) -> Result<()> {
        sqlx::query("UPDATE runs SET lease_until_ms = $1 WHERE id = $2")
            .bind(now_ms() + lease_ms)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(err("renewing a lease"))?;
        Ok(())
    }

    /// Let go of a paused run (this daemon stops): another daemon resumes it at once.
    pub async fn release_lease(&self, id: &str) -> Result<()> {
        sqlx::query("UPDATE runs SET lease_until_ms = 0 WHERE id = $1 AND status = 'awaiting_approval'")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(err("releasing a lease"))?;
        Ok(())
    }

    /// Extend the leases of the running runs this daemon executes (`ids`); a paused one is renewed
    /// by its approver.
    pub async fn renew_running(&self, ids: &[String], lease_ms: i64) -> Result<()> {
        let until = now_ms() + lease_ms;
        for id in ids {
            sqlx::query("UPDATE runs SET lease_until_ms = $1 WHERE id = $2 AND status = 'running'")
                .bind(until)
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(err("renewing a running run's lease"))?;
        }
        Ok(())
    }

    /// Runs left `running` by a daemon that is gone (their lease lapsed: no live daemon holds them)
    /// become `interrupted`, finished now; returns their ids. At most 100 a call.
    pub async fn interrupt_abandoned_runs(&self) -> Result<Vec<String>> {
        let now = now_ms();
        let rows = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' AND (lease_until_ms IS NULL OR lease_until_ms < $1) ORDER BY created_ms LIMIT 100"))
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .map_err(err("listing abandoned runs"))?;
        let mut out = Vec::new();
        for r in rows.iter().map(Self::run_of) {
            let r = r?;
            let mut body = r.body.as_object().cloned().unwrap_or_default();
            body.insert("status".into(), json!("interrupted"));
            body.insert(
                "answer".into(),
                json!("The run was interrupted: the daemon executing it stopped before it finished."),
            );
            let done = sqlx::query("UPDATE runs SET status = 'interrupted', body = $1, lease_until_ms = NULL, finished_ms = $2, duration_ms = $3 WHERE id = $4 AND status = 'running' AND (lease_until_ms IS NULL OR lease_until_ms < $5)")
                .bind(Value::Object(body).to_string())
                .bind(now)
                .bind(now - r.created_ms)
                .bind(&r.id)
                .bind(now)
                .execute(&self.pool)
                .await
                .map_err(err("interrupting an abandoned run"))?;
            if done.rows_affected() > 0 {
                out.push(r.id);
            }
        }
        Ok(out)
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
}
