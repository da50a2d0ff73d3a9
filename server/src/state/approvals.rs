//! Approvals: APIs whose calls wait for a person, and the decisions given.

use super::store::{err, now_ms, Result, StateStore};
use sqlx::Row;

impl StateStore {
    pub async fn requires_approval(&self) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT api_id FROM approval_apis ORDER BY api_id")
            .fetch_all(&self.pool)
            .await
            .map_err(err("reading approvals"))?;
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
        let row = sqlx::query("SELECT decision, decided_by, reason FROM approvals WHERE run_id = $1 AND call_key = $2")
            .bind(run_id)
            .bind(call_key)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a decision"))?;
        row.map(|r| {
            let d: String = r.try_get("decision").map_err(err("reading a decision"))?;
            Ok((
                d == "approved",
                r.try_get("decided_by").map_err(err("reading a decision"))?,
                r.try_get("reason").map_err(err("reading a decision"))?,
            ))
        })
        .transpose()
    }
}
