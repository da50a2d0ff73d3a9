//! Users, their API keys, tool credentials and the audit log (administrators), and `GET /v1/me`.

use super::auth::require_admin;
use super::error::{ApiError, ApiJson};
use super::shared::Daemon;
use crate::state::{now_ms, AuditEntry, Caller, CredentialRow, KeyInfo, Role, User};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use toolgraph_engine::exec::credentials::{check_scope, valid_host, Placement};

/// Who the caller is (user id, name, role).
///
/// A console login also gets its CSRF token back (a reloaded page needs it again).
#[utoipa::path(get, path = "/v1/me", tag = "accounts", responses((status = 200, description = "the caller", body = super::console::Me)))]
pub(super) async fn me(
    Extension(caller): Extension<Caller>,
    login: Option<Extension<super::console::ConsoleLogin>>,
) -> Json<super::console::Me> {
    let mut v = super::console::me_of(&caller);
    v.csrf_token = login.and_then(|l| l.0.csrf);
    Json(v)
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Users {
    users: Vec<User>,
}

/// Users (administrators).
#[utoipa::path(get, path = "/v1/users", tag = "accounts", responses((status = 200, description = "every user", body = Users)))]
pub(super) async fn list_users(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Users>, ApiError> {
    require_admin(&caller, "managing users")?;
    Ok(Json(Users { users: d.state.users().await? }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewUser {
    /// 1 to 64 visible characters, unique without case and look-alike letters.
    #[schema(min_length = 1, max_length = 64)]
    name: String,
    /// `admin` or `user` (default).
    #[serde(default = "default_role")]
    #[schema(default = "user")]
    role: String,
    /// For the console's login (stored as an argon2id hash).
    #[serde(default)]
    #[schema(write_only, max_length = 200)]
    password: Option<String>,
    /// Also create a first key (returned once).
    #[serde(default)]
    with_key: bool,
}

fn default_role() -> String {
    "user".into()
}

/// A new key, shown once.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ShownKey {
    id: String,
    /// The key itself: shown this once, stored only as a digest.
    key: String,
    /// Its first characters, to recognise it in lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_ms: Option<i64>,
    note: &'static str,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct CreatedUser {
    user: User,
    /// With `with_key`: the first key.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<ShownKey>,
}

/// Add a user (administrators), optionally with a password and a first key.
#[utoipa::path(post, path = "/v1/users", tag = "accounts", request_body = NewUser,
    responses((status = 201, description = "added", body = CreatedUser), (status = 409, description = "the name is taken (`user_exists`)", body = super::error::ErrorBody)))]
pub(super) async fn add_user(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiJson(b): ApiJson<NewUser>,
) -> Result<(StatusCode, Json<CreatedUser>), ApiError> {
    require_admin(&caller, "managing users")?;
    let role = Role::parse(&b.role).ok_or_else(|| {
        ApiError::invalid(format!("role: `{}` is not admin or user", b.role.chars().take(20).collect::<String>()))
    })?;
    let hash = match &b.password {
        Some(p) if p.chars().count() > 200 => return Err(ApiError::invalid("password: at most 200 characters")),
        Some(p) => Some(crate::state::secrets::hash_password(p).map_err(ApiError::invalid)?),
        None => None,
    };
    if let Some(existing) = d.state.name_taken(&b.name).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "user_exists",
            format!("user `{existing}` exists already (names are compared without case)"),
        ));
    }
    let has_password = hash.is_some();
    let u = d.state.add_user(&b.name, role, hash).await.map_err(|e| ApiError::invalid(e.0))?;
    if has_password {
        d.auth_required.store(true, Ordering::SeqCst);
    }
    let mut key = None;
    if b.with_key {
        let (info, k) = d.state.add_key(&u.id, "first key", None).await?;
        d.auth_required.store(true, Ordering::SeqCst);
        key = Some(ShownKey { id: info.id, key: k, prefix: None, expires_ms: None, note: "shown once: store it now" });
    }
    d.audit(&caller, "user.add", &u.id, json!({"name": u.name, "role": u.role})).await;
    Ok((StatusCode::CREATED, Json(CreatedUser { user: u, key })))
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Keys {
    keys: Vec<KeyInfo>,
}

/// A user's keys (never the keys themselves): their own, or anyone's for administrators.
#[utoipa::path(get, path = "/v1/users/{id}/keys", tag = "accounts", params(("id" = String, Path, description = "the user's id")),
    responses((status = 200, description = "the keys", body = Keys)))]
pub(super) async fn list_keys(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<Keys>, ApiError> {
    if id != caller.user_id {
        require_admin(&caller, "other users' keys")?;
    }
    Ok(Json(Keys { keys: d.state.keys(Some(&id)).await? }))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewKey {
    #[serde(default)]
    #[schema(max_length = 100)]
    label: String,
    /// Days until it expires (none: never; at most [`MAX_KEY_DAYS`]).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3650)]
    expires_in_days: Option<u32>,
}

/// The longest a key may be given to live: ten years (a key meant never to expire says so by
/// leaving the field out, not by a number that overflows into "never").
pub const MAX_KEY_DAYS: u32 = 3650;

/// When a key given `days` to live expires (ms since the epoch); `Err` outside 1..=[`MAX_KEY_DAYS`].
pub fn key_expiry(days: Option<u32>, now_ms: i64) -> Result<Option<i64>, String> {
    match days {
        None => Ok(None),
        Some(n) if (1..=MAX_KEY_DAYS).contains(&n) => Ok(Some(now_ms + i64::from(n) * 86_400_000)),
        Some(n) => Err(format!("expires_in_days: {n} is not between 1 and {MAX_KEY_DAYS}")),
    }
}

/// A new key, shown once. Users may add keys for themselves.
#[utoipa::path(post, path = "/v1/users/{id}/keys", tag = "accounts", params(("id" = String, Path, description = "the user's id")), request_body = Option<NewKey>,
    responses((status = 201, description = "the key, shown once", body = ShownKey)))]
pub(super) async fn add_key(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Option<ApiJson<NewKey>>,
) -> Result<(StatusCode, Json<ShownKey>), ApiError> {
    if id != caller.user_id {
        require_admin(&caller, "other users' keys")?;
    }
    let b = body.map(|b| b.0).unwrap_or_default();
    if b.label.chars().count() > 100 {
        return Err(ApiError::invalid("label: at most 100 characters"));
    }
    if d.state.user(&id).await?.is_none() {
        return Err(ApiError::not_found(format!("no user {id}")));
    }
    let expires = key_expiry(b.expires_in_days, now_ms()).map_err(ApiError::invalid)?;
    let (info, key) = d.state.add_key(&id, &b.label, expires).await?;
    d.auth_required.store(true, Ordering::SeqCst);
    d.audit(&caller, "key.add", &info.id, json!({"user_id": id, "label": info.label})).await;
    Ok((
        StatusCode::CREATED,
        Json(ShownKey {
            id: info.id,
            key,
            prefix: Some(info.prefix),
            expires_ms: info.expires_ms,
            note: "shown once: store it now",
        }),
    ))
}

/// Revoke a key (administrators, or the key's owner); console logins made with it end too.
#[utoipa::path(delete, path = "/v1/keys/{id}", tag = "accounts", params(("id" = String, Path, description = "the key's id")),
    responses((status = 204, description = "revoked"), (status = 409, description = "revoked already (`already_revoked`)", body = super::error::ErrorBody)))]
pub(super) async fn revoke_key(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let owner = d.state.keys(None).await?.into_iter().find(|k| k.id == id).map(|k| k.user_id);
    match owner {
        Some(o) if o == caller.user_id || caller.is_admin() => {}
        _ => return Err(ApiError::not_found(format!("no key {id}"))),
    }
    if !d.state.revoke_key(&id).await? {
        return Err(ApiError::new(StatusCode::CONFLICT, "already_revoked", format!("key {id} is revoked already")));
    }
    d.forget_keys();
    // Console logins made with that key end too (password logins stay).
    let logins = d.state.delete_logins_of_key(&id).await?;
    d.audit(&caller, "key.revoke", &id, json!({"console_logins_ended": logins})).await;
    Ok(StatusCode::NO_CONTENT)
}

/// A stored credential entry, without its value.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct CredentialView {
    scope: String,
    host: String,
    /// `header`, `query` or `bearer`.
    placement: String,
    name: String,
    /// `sealed`, `env` or `file`.
    stored: String,
    updated_by: String,
    updated_ms: i64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Credentials {
    credentials: Vec<CredentialView>,
    /// Entries the executor holds now.
    in_use: usize,
}

/// Tool credentials: scope, host, placement, name, how stored — never values (administrators).
#[utoipa::path(get, path = "/v1/credentials", tag = "accounts", responses((status = 200, description = "the credentials, without values", body = Credentials)))]
pub(super) async fn list_credentials(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Credentials>, ApiError> {
    require_admin(&caller, "tool credentials")?;
    let rows = d.state.credentials().await?;
    let list = rows
        .iter()
        .map(|r| {
            let stored = if r.sealed.is_some() {
                "sealed".to_string()
            } else {
                r.reference.as_deref().and_then(|x| x.split(':').next()).unwrap_or("none").to_string()
            };
            CredentialView {
                scope: r.scope.clone(),
                host: r.host.clone(),
                placement: r.placement.clone(),
                name: r.name.clone(),
                stored,
                updated_by: r.updated_by.clone(),
                updated_ms: r.updated_ms,
            }
        })
        .collect();
    Ok(Json(Credentials { credentials: list, in_use: d.stack.executor.credentials().len() }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CredentialEntry {
    /// `header`, `query` or `bearer`.
    #[schema(example = "header")]
    placement: String,
    /// The header or query parameter's name (ignored for `bearer`).
    name: String,
    /// The value, sealed with TOOLGRAPH_SECRET_KEY (exactly one of value, from_env, from_file).
    #[serde(default)]
    #[schema(write_only, max_length = 4096)]
    value: Option<String>,
    #[serde(default)]
    from_env: Option<String>,
    #[serde(default)]
    from_file: Option<String>,
}

impl std::fmt::Debug for CredentialBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CredentialBody({} entries, values redacted)", self.entries.len())
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CredentialBody {
    /// The host the values may be sent to (default: a host scope's host, or the host of the tool's APIs).
    #[serde(default)]
    host: Option<String>,
    #[schema(min_items = 1, max_items = 10)]
    entries: Vec<CredentialEntry>,
}

/// An entry as stored (no value).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct StoredEntry {
    placement: String,
    name: String,
    /// `sealed`, `env` or `file`.
    stored: &'static str,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct StoredCredentials {
    scope: String,
    host: String,
    entries: Vec<StoredEntry>,
}

const MAX_ENTRIES: usize = 10;
const MAX_VALUE_CHARS: usize = 4096;

/// The host a tool's APIs are called on (all of them must agree).
fn tool_host(d: &Daemon, scope: &str) -> Result<String, ApiError> {
    let tool = scope.trim_start_matches("tool:");
    let engine = d.engine();
    let mut hosts: Vec<String> = engine
        .graph()
        .apis
        .values()
        .filter(|a| toolgraph_engine::exec::credentials::tool_scope(&a.id).as_deref() == Some(scope) || a.tool == tool)
        .filter_map(|a| reqwest::Url::parse(&a.url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase)))
        .collect();
    hosts.sort();
    hosts.dedup();
    match hosts.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(ApiError::invalid(format!("no API of {tool} has a URL with a host: give `host`"))),
        many => Err(ApiError::invalid(format!(
            "the APIs of {tool} are on several hosts ({}): give `host`",
            many.join(", ")
        ))),
    }
}

/// Set a scope's credentials (administrators).
///
/// The scope is `tool:CATEGORY/TOOL` or `host:HOST`; its entries are replaced. A `value` is sealed
/// with `TOOLGRAPH_SECRET_KEY`; `from_env` / `from_file` store only the reference; every entry is
/// bound to one host. The answer never holds a value.
#[utoipa::path(put, path = "/v1/credentials/{scope}", tag = "accounts", params(("scope" = String, Path, description = "`tool:CATEGORY/TOOL` or `host:HOST`")), request_body = CredentialBody,
    responses((status = 200, description = "stored (without values)", body = StoredCredentials)))]
pub(super) async fn put_credentials(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(scope): Path<String>,
    ApiJson(b): ApiJson<CredentialBody>,
) -> Result<Json<StoredCredentials>, ApiError> {
    require_admin(&caller, "tool credentials")?;
    check_scope(&scope).map_err(ApiError::invalid)?;
    if b.entries.is_empty() || b.entries.len() > MAX_ENTRIES {
        return Err(ApiError::invalid(format!("entries: 1 to {MAX_ENTRIES}")));
    }
    let host = match (&b.host, scope.strip_prefix("host:")) {
        (Some(h), Some(s)) if !h.eq_ignore_ascii_case(s) => {
            return Err(ApiError::invalid("host: a host scope's credentials go to that host only"))
        }
        (_, Some(s)) => s.to_ascii_lowercase(),
        (Some(h), None) => h.to_ascii_lowercase(),
        (None, None) => tool_host(&d, &scope)?,
    };
    if !valid_host(&host) {
        return Err(ApiError::invalid("host: a host name, without scheme, port or path"));
    }
    let mut rows = Vec::new();
    let mut shown = Vec::new();
    for (i, e) in b.entries.iter().enumerate() {
        let placement = Placement::parse(&e.placement)
            .ok_or_else(|| ApiError::invalid(format!("entries[{i}].placement: header, query or bearer")))?;
        let name = if placement == Placement::Bearer { "Authorization".to_string() } else { e.name.trim().to_string() };
        let token_ok = !name.is_empty()
            && name.len() <= 100
            && name.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c));
        if !token_ok {
            return Err(ApiError::invalid(format!("entries[{i}].name: 1 to 100 letters, digits, `-`, `_` or `.`")));
        }
        let (sealed, reference, stored) = match (&e.value, &e.from_env, &e.from_file) {
            (Some(v), None, None) => {
                if v.is_empty() || v.chars().count() > MAX_VALUE_CHARS || v.chars().any(char::is_control) {
                    return Err(ApiError::invalid(format!(
                        "entries[{i}].value: 1 to {MAX_VALUE_CHARS} characters, no control characters"
                    )));
                }
                let key = d.sealing.as_ref().ok_or_else(|| ApiError::invalid("values are sealed with TOOLGRAPH_SECRET_KEY(_FILE), which this daemon lacks: set it, or give `from_env` / `from_file`"))?;
                (Some(key.seal(&scope, &name, v).map_err(ApiError::internal)?), None, "sealed")
            }
            (None, Some(env), None)
                if !env.is_empty()
                    && env.len() <= 100
                    && env.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') =>
            {
                if !d.references.env_allowed(env) {
                    return Err(ApiError::invalid(format!(
                        "entries[{i}].from_env: a variable starting with {} (server.credential_env_prefix), never one of the daemon's own secrets",
                        d.references.env_prefix()
                    )));
                }
                (None, Some(format!("env:{env}")), "env")
            }
            (None, None, Some(f)) if !f.is_empty() && f.len() <= 500 && std::path::Path::new(f).is_absolute() => {
                if let Some(why) = d.references.file_refused(f) {
                    return Err(ApiError::invalid(format!("entries[{i}].from_file: {why}")));
                }
                (None, Some(format!("file:{f}")), "file")
            }
            _ => {
                return Err(ApiError::invalid(format!(
                "entries[{i}]: exactly one of `value`, `from_env` (a variable name) or `from_file` (an absolute path)"
            )))
            }
        };
        rows.push(CredentialRow {
            scope: scope.clone(),
            name: name.clone(),
            placement: placement.as_str().into(),
            host: host.clone(),
            sealed,
            reference,
            updated_by: caller.name.clone(),
            updated_ms: now_ms(),
        });
        shown.push(StoredEntry { placement: placement.as_str().into(), name, stored });
    }
    // A reference that cannot be read now is refused (it would fail every call later).
    let (_, problems) = crate::state::secrets::credential_set(&rows, d.sealing.as_ref(), &d.references);
    if !problems.is_empty() {
        return Err(ApiError::invalid(format!("cannot use: {}", problems.join("; "))));
    }
    d.state.put_credentials(&scope, &rows).await?;
    d.sync_state().await?;
    d.audit(&caller, "credentials.put", &scope, json!({"host": host, "entries": shown})).await;
    Ok(Json(StoredCredentials { scope, host, entries: shown }))
}

/// Delete a scope's credentials (administrators).
#[utoipa::path(delete, path = "/v1/credentials/{scope}", tag = "accounts", params(("scope" = String, Path, description = "`tool:CATEGORY/TOOL` or `host:HOST`")),
    responses((status = 204, description = "deleted")))]
pub(super) async fn delete_credentials(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(scope): Path<String>,
) -> Result<StatusCode, ApiError> {
    require_admin(&caller, "tool credentials")?;
    if !d.state.delete_credentials(&scope).await? {
        return Err(ApiError::not_found(format!("no credentials for {scope}")));
    }
    d.sync_state().await?;
    d.audit(&caller, "credentials.delete", &scope, json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct AuditQuery {
    /// Entries to return (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct AuditLog {
    entries: Vec<AuditEntry>,
}

/// The audit log, newest first (administrators).
#[utoipa::path(get, path = "/v1/audit", tag = "accounts", params(AuditQuery), responses((status = 200, description = "the entries", body = AuditLog)))]
pub(super) async fn audit_log(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<AuditLog>, ApiError> {
    require_admin(&caller, "the audit log")?;
    let q = q?.0;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(format!("limit: {limit} is not within 1..=1000")));
    }
    Ok(Json(AuditLog { entries: d.state.audit_log(limit).await? }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_lives_a_bounded_number_of_days_or_forever_by_saying_nothing() {
        assert_eq!(key_expiry(None, 0), Ok(None));
        assert_eq!(key_expiry(Some(1), 5), Ok(Some(5 + 86_400_000)));
        assert_eq!(key_expiry(Some(MAX_KEY_DAYS), 0), Ok(Some(i64::from(MAX_KEY_DAYS) * 86_400_000)));
        for bad in [0, MAX_KEY_DAYS + 1, 2_147_483_648, u32::MAX] {
            let e = key_expiry(Some(bad), 0).unwrap_err();
            assert!(e.contains("expires_in_days") && e.contains(&bad.to_string()), "{e}");
        }
    }
}
