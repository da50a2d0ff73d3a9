//! Saved chains: a person's chains, re-runnable.

use super::store::{err, json_of, like_literal, Result, StateStore};
use serde::Serialize;
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::Row;

/// A saved chain (template).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SavedChain {
    pub chain_id: String,
    pub user_id: String,
    pub name: String,
    pub description: String,
    pub steps: Value,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl StateStore {
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

    pub(super) fn chain_of(r: &AnyRow) -> Result<SavedChain> {
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
        let row = sqlx::query(
            "SELECT id, user_id, name, description, steps, created_ms, updated_ms FROM chains WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(err("reading a chain"))?;
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
        let r = sqlx::query("DELETE FROM chains WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(err("deleting a chain"))?;
        Ok(r.rows_affected() > 0)
    }
}
