//! Tool credentials: sealed values or references (`env:` / `file:`), per scope.

use super::store::{err, Result, StateStore};
use sqlx::Row;

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

impl StateStore {
    /// Replace every entry of a scope.
    pub async fn put_credentials(&self, scope: &str, rows: &[CredentialRow]) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(err("writing credentials"))?;
        sqlx::query("DELETE FROM credentials WHERE scope = $1")
            .bind(scope)
            .execute(&mut *tx)
            .await
            .map_err(err("writing credentials"))?;
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
        let r = sqlx::query("SELECT COUNT(*) AS n, MAX(updated_ms) AS m FROM credentials")
            .fetch_one(&self.pool)
            .await
            .map_err(err("reading credentials"))?;
        Ok((
            r.try_get("n").map_err(err("reading credentials"))?,
            r.try_get::<Option<i64>, _>("m").map_err(err("reading credentials"))?.unwrap_or(0),
        ))
    }

    pub async fn delete_credentials(&self, scope: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM credentials WHERE scope = $1")
            .bind(scope)
            .execute(&self.pool)
            .await
            .map_err(err("deleting credentials"))?;
        Ok(r.rows_affected() > 0)
    }
}
