//! Users, their API keys (digests only) and console logins.

use super::store::{err, key_digest, now_ms, random_id, Result, StateError, StateStore};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::Row;

/// Roles: admins manage tools, statuses, Cypher, credentials and users; users run requests and
/// see only their own runs, sessions and saved chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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

/// A live console login ([`StateStore::login`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Login {
    pub caller: Caller,
    /// The token its state-changing requests must echo.
    pub csrf: String,
    /// The digest of the bootstrap key it was made with (not a stored user key): valid only while
    /// the daemon still has that key configured.
    pub bootstrap_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct User {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub has_password: bool,
    pub created_ms: i64,
}

/// A key's record (never the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
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

impl StateStore {
    /// Add a user (`name`: 1..64 visible characters, unique).
    pub async fn add_user(&self, name: &str, role: Role, password_hash: Option<String>) -> Result<User> {
        // ASCII only: a name people read must not pass for another (`admіn` with a Cyrillic і).
        if name.is_empty()
            || name.len() > 64
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
        {
            return Err(StateError("a user name is 1 to 64 ASCII letters, digits, `.`, `_`, `@` or `-`".into()));
        }
        if let Some(existing) = self.name_taken(name).await? {
            return Err(StateError(format!("user `{existing}` exists already (names are compared without case)")));
        }
        let u = User {
            id: random_id("usr", 8),
            name: name.into(),
            role,
            has_password: password_hash.is_some(),
            created_ms: now_ms(),
        };
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

    /// The existing user name equal to `name` without regard to case (`ROOT` takes `root`), if any.
    pub async fn name_taken(&self, name: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT name FROM users WHERE LOWER(name) = $1")
            .bind(name.to_ascii_lowercase())
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading users"))?;
        row.map(|r| r.try_get::<String, _>("name").map_err(err("reading users"))).transpose()
    }

    pub(super) fn user_of(r: &AnyRow) -> Result<User> {
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
        let rows = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users ORDER BY created_ms, id")
            .fetch_all(&self.pool)
            .await
            .map_err(err("listing users"))?;
        rows.iter().map(Self::user_of).collect()
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>> {
        let row = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a user"))?;
        row.as_ref().map(Self::user_of).transpose()
    }

    pub async fn user(&self, id: &str) -> Result<Option<User>> {
        let row = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a user"))?;
        row.as_ref().map(Self::user_of).transpose()
    }

    /// The user's password hash (argon2id PHC string), if they have one.
    pub async fn password_hash(&self, name: &str) -> Result<Option<(User, String)>> {
        let row = sqlx::query("SELECT id, name, role, password_hash, created_ms FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a user"))?;
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

    /// Record a console login: `token` (the cookie's value, stored as a digest) for `caller`,
    /// with the CSRF token its state-changing requests echo, valid until `expires_ms`.
    /// `key`: the API key it was made with (none: a password), so that revoking the key ends it.
    pub async fn put_login(
        &self,
        token: &str,
        caller: &Caller,
        csrf: &str,
        expires_ms: i64,
        key: Option<&str>,
    ) -> Result<()> {
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

    /// A console login that has not expired, with its user's current role (a login of a user
    /// deleted since is no login). A login made with a user's API key lives only as long as that key:
    /// revoked (by any route) or expired, the login is gone. One made with a key the store does not
    /// hold (a bootstrap key) names that key's digest, for the daemon to check it is still configured.
    pub async fn login(&self, token: &str) -> Result<Option<Login>> {
        let now = now_ms();
        let row = sqlx::query("SELECT l.user_id, l.name, l.role, l.csrf, l.key_digest, u.role AS user_role, u.name AS user_name, k.id AS key_id, k.revoked_ms AS key_revoked, k.expires_ms AS key_expires FROM console_logins l LEFT JOIN users u ON u.id = l.user_id LEFT JOIN api_keys k ON k.digest = l.key_digest WHERE l.digest = $1 AND l.expires_ms > $2")
            .bind(key_digest(token))
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("reading a login"))?;
        let Some(r) = row else { return Ok(None) };
        let get =
            |c: &str| -> Result<Option<String>> { r.try_get::<Option<String>, _>(c).map_err(err("reading a login")) };
        let get_ms =
            |c: &str| -> Result<Option<i64>> { r.try_get::<Option<i64>, _>(c).map_err(err("reading a login")) };
        let made_with = get("key_digest")?;
        let bootstrap_key = match (&made_with, get("key_id")?) {
            (None, _) => None,
            (Some(_), Some(_)) => {
                if get_ms("key_revoked")?.is_some() || get_ms("key_expires")?.is_some_and(|e| e <= now) {
                    return Ok(None);
                }
                None
            }
            (Some(d), None) => Some(d.clone()),
        };
        let user_id = get("user_id")?.unwrap_or_default();
        let (name, role) = match (get("user_name")?, get("user_role")?) {
            (Some(n), Some(role)) => (n, role),
            _ if user_id == "bootstrap" => (get("name")?.unwrap_or_default(), get("role")?.unwrap_or_default()),
            _ => return Ok(None),
        };
        let role =
            Role::parse(&role).ok_or_else(|| StateError(format!("login of {user_id}: unknown role `{role}`")))?;
        Ok(Some(Login {
            caller: Caller { user_id, name, role },
            csrf: get("csrf")?.unwrap_or_default(),
            bootstrap_key,
        }))
    }

    /// End the console logins made with a key (it was revoked); how many.
    pub async fn delete_logins_of_key(&self, key_id: &str) -> Result<u64> {
        let n =
            sqlx::query("DELETE FROM console_logins WHERE key_digest IN (SELECT digest FROM api_keys WHERE id = $1)")
                .bind(key_id)
                .execute(&self.pool)
                .await
                .map_err(err("ending logins"))?
                .rows_affected();
        Ok(n)
    }

    /// End a console login (logout).
    pub async fn delete_login(&self, token: &str) -> Result<bool> {
        let n = sqlx::query("DELETE FROM console_logins WHERE digest = $1")
            .bind(key_digest(token))
            .execute(&self.pool)
            .await
            .map_err(err("ending a login"))?
            .rows_affected();
        Ok(n > 0)
    }

    /// Create a key for a user: returned once (only its digest is stored).
    pub async fn add_key(&self, user_id: &str, label: &str, expires_ms: Option<i64>) -> Result<(KeyInfo, String)> {
        if self.user(user_id).await?.is_none() {
            return Err(StateError(format!("no user {user_id}")));
        }
        let key = random_id("tgk", 24);
        let info = KeyInfo {
            id: random_id("key", 8),
            user_id: user_id.into(),
            prefix: key[..10].to_string(),
            label: label.chars().take(100).collect(),
            created_ms: now_ms(),
            expires_ms,
            revoked_ms: None,
        };
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
            Some(u) => {
                sqlx::query(&format!("{sql} WHERE user_id = $1 ORDER BY created_ms, id"))
                    .bind(u)
                    .fetch_all(&self.pool)
                    .await
            }
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
        let r = sqlx::query("UPDATE api_keys SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL")
            .bind(now_ms())
            .bind(key_id)
            .execute(&self.pool)
            .await
            .map_err(err("revoking a key"))?;
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
        Ok(Some(Caller {
            user_id: r.try_get("id").map_err(err("checking a key"))?,
            name: r.try_get("name").map_err(err("checking a key"))?,
            role: Role::parse(&role).unwrap_or(Role::User),
        }))
    }
}
