//! Conversational sessions: each one's carried-over state, owned by a user.

use super::store::{err, json_of, now_ms, Result, StateStore};
use serde_json::Value;
use sqlx::Row;

pub(super) async fn put_session_on<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(
    e: E,
    id: &str,
    user_id: &str,
    state: &Value,
) -> Result<()> {
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

impl StateStore {
    /// A session's owner and state (`turns`, `earlier`, `given`).
    pub async fn session(&self, id: &str) -> Result<Option<(String, Value, i64)>> {
        let row = sqlx::query("SELECT user_id, state, updated_ms FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a session"))?;
        row.map(|r| {
            let state: String = r.try_get("state").map_err(err("reading a session"))?;
            Ok((
                r.try_get("user_id").map_err(err("reading a session"))?,
                json_of(&state),
                r.try_get("updated_ms").map_err(err("reading a session"))?,
            ))
        })
        .transpose()
    }

    /// A user's sessions, most recently used first: (id, state, updated_ms).
    pub async fn list_sessions(&self, user_id: &str, limit: usize) -> Result<Vec<(String, Value, i64)>> {
        let rows = sqlx::query(&format!(
            "SELECT id, state, updated_ms FROM sessions WHERE user_id = $1 ORDER BY updated_ms DESC LIMIT {}",
            limit.clamp(1, 200)
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await
        .map_err(err("listing sessions"))?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state").map_err(err("listing sessions"))?;
                Ok((
                    r.try_get("id").map_err(err("listing sessions"))?,
                    json_of(&state),
                    r.try_get("updated_ms").map_err(err("listing sessions"))?,
                ))
            })
            .collect()
    }

    pub async fn put_session(&self, id: &str, user_id: &str, state: &Value) -> Result<()> {
        put_session_on(&self.pool, id, user_id, state).await
    }

    pub async fn delete_session(&self, id: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM sessions WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(err("deleting a session"))?;
        Ok(r.rows_affected() > 0)
    }
}
