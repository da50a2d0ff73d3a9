//! Users, their API keys, tool credentials and the audit log (administrators), and `GET /v1/me`.

use super::error::{ApiError, ApiJson};
use super::{require_admin, Daemon};
use crate::state::{now_ms, Caller, CredentialRow, Role};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use toolgraph_engine::exec::credentials::{check_scope, valid_host, Placement};

/// `GET /v1/me`: who this key belongs to.
/// A console login also gets its CSRF token back (a reloaded page needs it again).
pub(super) async fn me(Extension(caller): Extension<Caller>, login: Option<Extension<super::console::ConsoleLogin>>) -> Json<Value> {
    let mut v = super::console::me_of(&caller);
    if let Some(csrf) = login.and_then(|l| l.0.csrf) {
        v["csrf_token"] = json!(csrf);
    }
    Json(v)
}

pub(super) async fn list_users(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "managing users")?;
    Ok(Json(json!({"users": d.state.users().await?})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewUser {
    name: String,
    #[serde(default = "default_role")]
    role: String,
    /// For the console's login (stored as an argon2id hash).
    #[serde(default)]
    password: Option<String>,
    /// Also create a first key (returned once).
    #[serde(default)]
    with_key: bool,
}

fn default_role() -> String {
    "user".into()
}

/// `POST /v1/users`.
pub(super) async fn add_user(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, ApiJson(b): ApiJson<NewUser>) -> Result<(StatusCode, Json<Value>), ApiError> {
    require_admin(&caller, "managing users")?;
    let role = Role::parse(&b.role).ok_or_else(|| ApiError::invalid(format!("role: `{}` is not admin or user", b.role.chars().take(20).collect::<String>())))?;
    let hash = match &b.password {
        Some(p) if p.chars().count() > 200 => return Err(ApiError::invalid("password: at most 200 characters")),
        Some(p) => Some(crate::state::secrets::hash_password(p).map_err(ApiError::invalid)?),
        None => None,
    };
    if let Some(existing) = d.state.name_taken(&b.name).await? {
        return Err(ApiError::new(StatusCode::CONFLICT, "user_exists", format!("user `{existing}` exists already (names are compared without case)")));
    }
    let has_password = hash.is_some();
    let u = d.state.add_user(&b.name, role, hash).await.map_err(|e| ApiError::invalid(e.0))?;
    if has_password {
        d.auth_required.store(true, Ordering::SeqCst);
    }
    let mut body = json!({"user": u});
    if b.with_key {
        let (info, key) = d.state.add_key(&u.id, "first key", None).await?;
        d.auth_required.store(true, Ordering::SeqCst);
        body["key"] = json!({"id": info.id, "key": key, "note": "shown once: store it now"});
    }
    d.audit(&caller, "user.add", &u.id, json!({"name": u.name, "role": u.role})).await;
    Ok((StatusCode::CREATED, Json(body)))
}

pub(super) async fn list_keys(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    if id != caller.user_id {
        require_admin(&caller, "other users' keys")?;
    }
    Ok(Json(json!({"keys": d.state.keys(Some(&id)).await?})))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewKey {
    #[serde(default)]
    label: String,
    /// Days until it expires (none: never).
    #[serde(default)]
    expires_in_days: Option<u32>,
}

/// `POST /v1/users/{id}/keys`: a new key, shown once. Users may add keys for themselves.
pub(super) async fn add_key(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>, body: Option<Json<NewKey>>) -> Result<(StatusCode, Json<Value>), ApiError> {
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
    let expires = b.expires_in_days.map(|n| now_ms() + n as i64 * 86_400_000);
    let (info, key) = d.state.add_key(&id, &b.label, expires).await?;
    d.auth_required.store(true, Ordering::SeqCst);
    d.audit(&caller, "key.add", &info.id, json!({"user_id": id, "label": info.label})).await;
    Ok((StatusCode::CREATED, Json(json!({"id": info.id, "key": key, "prefix": info.prefix, "expires_ms": info.expires_ms, "note": "shown once: store it now"}))))
}

/// `DELETE /v1/keys/{id}`: revoke (administrators, or the key's owner).
pub(super) async fn revoke_key(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
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

/// `GET /v1/credentials`: scopes, hosts, placements and names — never a value.
pub(super) async fn list_credentials(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "tool credentials")?;
    let rows = d.state.credentials().await?;
    let list: Vec<Value> = rows
        .iter()
        .map(|r| {
            let stored = if r.sealed.is_some() { "sealed".to_string() } else { r.reference.as_deref().and_then(|x| x.split(':').next()).unwrap_or("none").to_string() };
            json!({"scope": r.scope, "host": r.host, "placement": r.placement, "name": r.name, "stored": stored, "updated_by": r.updated_by, "updated_ms": r.updated_ms})
        })
        .collect();
    Ok(Json(json!({"credentials": list, "in_use": d.stack.executor.credentials().len()})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CredentialEntry {
    placement: String,
    name: String,
    #[serde(default)]
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CredentialBody {
    /// The host the values may be sent to (default: a host scope's host, or the host of the tool's APIs).
    #[serde(default)]
    host: Option<String>,
    entries: Vec<CredentialEntry>,
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
        many => Err(ApiError::invalid(format!("the APIs of {tool} are on several hosts ({}): give `host`", many.join(", ")))),
    }
}

/// `PUT /v1/credentials/{scope}` (`tool:CATEGORY/TOOL` or `host:HOST`): replace the scope's
/// entries. A `value` is sealed with `TOOLGRAPH_SECRET_KEY`; `from_env` / `from_file` store only
/// the reference. The answer never holds a value.
pub(super) async fn put_credentials(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(scope): Path<String>, ApiJson(b): ApiJson<CredentialBody>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "tool credentials")?;
    check_scope(&scope).map_err(ApiError::invalid)?;
    if b.entries.is_empty() || b.entries.len() > MAX_ENTRIES {
        return Err(ApiError::invalid(format!("entries: 1 to {MAX_ENTRIES}")));
    }
    let host = match (&b.host, scope.strip_prefix("host:")) {
        (Some(h), Some(s)) if !h.eq_ignore_ascii_case(s) => return Err(ApiError::invalid("host: a host scope's credentials go to that host only")),
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
        let placement = Placement::parse(&e.placement).ok_or_else(|| ApiError::invalid(format!("entries[{i}].placement: header, query or bearer")))?;
        let name = if placement == Placement::Bearer { "Authorization".to_string() } else { e.name.trim().to_string() };
        let token_ok = !name.is_empty() && name.len() <= 100 && name.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c));
        if !token_ok {
            return Err(ApiError::invalid(format!("entries[{i}].name: 1 to 100 letters, digits, `-`, `_` or `.`")));
        }
        let (sealed, reference, stored) = match (&e.value, &e.from_env, &e.from_file) {
            (Some(v), None, None) => {
                if v.is_empty() || v.chars().count() > MAX_VALUE_CHARS || v.chars().any(char::is_control) {
                    return Err(ApiError::invalid(format!("entries[{i}].value: 1 to {MAX_VALUE_CHARS} characters, no control characters")));
                }
                let key = d.sealing.as_ref().ok_or_else(|| ApiError::invalid("values are sealed with TOOLGRAPH_SECRET_KEY(_FILE), which this daemon lacks: set it, or give `from_env` / `from_file`"))?;
                (Some(key.seal(&scope, &name, v).map_err(ApiError::internal)?), None, "sealed")
            }
            (None, Some(env), None) if !env.is_empty() && env.len() <= 100 && env.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') => (None, Some(format!("env:{env}")), "env"),
            (None, None, Some(f)) if !f.is_empty() && f.len() <= 500 && std::path::Path::new(f).is_absolute() => (None, Some(format!("file:{f}")), "file"),
            _ => return Err(ApiError::invalid(format!("entries[{i}]: exactly one of `value`, `from_env` (a variable name) or `from_file` (an absolute path)"))),
        };
        rows.push(CredentialRow { scope: scope.clone(), name: name.clone(), placement: placement.as_str().into(), host: host.clone(), sealed, reference, updated_by: caller.name.clone(), updated_ms: now_ms() });
        shown.push(json!({"placement": placement.as_str(), "name": name, "stored": stored}));
    }
    // A reference that cannot be read now is refused (it would fail every call later).
    let (_, problems) = crate::state::secrets::credential_set(&rows, d.sealing.as_ref());
    if !problems.is_empty() {
        return Err(ApiError::invalid(format!("cannot use: {}", problems.join("; "))));
    }
    d.state.put_credentials(&scope, &rows).await?;
    d.sync_state().await?;
    d.audit(&caller, "credentials.put", &scope, json!({"host": host, "entries": shown})).await;
    Ok(Json(json!({"scope": scope, "host": host, "entries": shown})))
}

/// `DELETE /v1/credentials/{scope}`.
pub(super) async fn delete_credentials(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, Path(scope): Path<String>) -> Result<StatusCode, ApiError> {
    require_admin(&caller, "tool credentials")?;
    if !d.state.delete_credentials(&scope).await? {
        return Err(ApiError::not_found(format!("no credentials for {scope}")));
    }
    d.sync_state().await?;
    d.audit(&caller, "credentials.delete", &scope, json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    limit: Option<usize>,
}

/// `GET /v1/audit?limit=`: newest first.
pub(super) async fn audit_log(State(d): State<Arc<Daemon>>, Extension(caller): Extension<Caller>, q: Result<Query<AuditQuery>, QueryRejection>) -> Result<Json<Value>, ApiError> {
    require_admin(&caller, "the audit log")?;
    let q = q?.0;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(format!("limit: {limit} is not within 1..=1000")));
    }
    Ok(Json(json!({"entries": d.state.audit_log(limit).await?})))
}
