//! The audit log, retention and row counts.

use super::store::{err, json_of, now_ms, random_id, Result, StateStore};
use serde::Serialize;
use serde_json::{json, Map, Value};
use sqlx::Row;

/// One entry of the audit log: who did what to what, when (never a secret).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AuditEntry {
    pub at_ms: i64,
    /// The user's name.
    pub actor: String,
    /// `user.add`, `key.revoke`, `tool.register`, `credentials.put`, …
    pub action: String,
    /// The id the action was on.
    pub target: String,
    pub detail: Value,
}

/// What retention removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    pub runs: u64,
    pub sessions: u64,
    pub audit: u64,
}

impl StateStore {
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

    pub async fn audit_log(&self, limit: usize) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(&format!(
            "SELECT at_ms, actor, action, target, detail FROM audit ORDER BY at_ms DESC, id DESC LIMIT {}",
            limit.clamp(1, 1000)
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(err("reading the audit log"))?;
        rows.iter()
            .map(|r| {
                let e = || err("reading the audit log");
                Ok(AuditEntry {
                    at_ms: r.try_get::<i64, _>("at_ms").map_err(e())?,
                    actor: r.try_get::<String, _>("actor").map_err(e())?,
                    action: r.try_get::<String, _>("action").map_err(e())?,
                    target: r.try_get::<String, _>("target").map_err(e())?,
                    detail: json_of(&r.try_get::<String, _>("detail").map_err(e())?),
                })
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
            p.runs += sqlx::query(
                "DELETE FROM runs WHERE created_ms < $1 AND status <> 'awaiting_approval' AND status <> 'running'",
            )
            .bind(cutoff)
            .execute(&self.pool)
            .await
            .map_err(err("retention"))?
            .rows_affected();
            p.sessions += sqlx::query("DELETE FROM sessions WHERE updated_ms < $1")
                .bind(cutoff)
                .execute(&self.pool)
                .await
                .map_err(err("retention"))?
                .rows_affected();
        }
        if keep > 0 {
            let row = sqlx::query(&format!(
                "SELECT created_ms FROM runs ORDER BY created_ms DESC LIMIT 1 OFFSET {}",
                keep - 1
            ))
            .fetch_optional(&self.pool)
            .await
            .map_err(err("retention"))?;
            if let Some(r) = row {
                let oldest_kept: i64 = r.try_get("created_ms").map_err(err("retention"))?;
                p.runs += sqlx::query(
                    "DELETE FROM runs WHERE created_ms < $1 AND status <> 'awaiting_approval' AND status <> 'running'",
                )
                .bind(oldest_kept)
                .execute(&self.pool)
                .await
                .map_err(err("retention"))?
                .rows_affected();
            }
        }
        sqlx::query("DELETE FROM console_logins WHERE expires_ms <= $1")
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(err("retention"))?;
        if audit_days > 0 {
            p.audit += sqlx::query("DELETE FROM audit WHERE at_ms < $1")
                .bind(now_ms() - audit_days as i64 * day_ms)
                .execute(&self.pool)
                .await
                .map_err(err("retention"))?
                .rows_affected();
        }
        Ok(p)
    }

    /// Every table's row count (for `toolgraph state stats` and tests).
    pub async fn counts(&self) -> Result<Map<String, Value>> {
        let mut m = Map::new();
        for t in ["users", "api_keys", "sessions", "runs", "chains", "credentials", "approvals", "audit"] {
            let n: i64 = sqlx::query(&format!("SELECT COUNT(*) AS n FROM {t}"))
                .fetch_one(&self.pool)
                .await
                .map_err(err("counting"))?
                .try_get("n")
                .map_err(err("counting"))?;
            m.insert(t.into(), json!(n));
        }
        Ok(m)
    }
}
